#!/bin/sh
# Tests of tools/chaos/phx-chaos against a fake job of `sleep` processes described by a
# handwritten pidfile. Every process signalled was started here; a decoy process that is
# not in any pidfile must survive everything.
# usage (from the repo root or anywhere): sh tests/chaos/test_chaos.sh
HERE=$(cd "$(dirname "$0")" && pwd)
CHAOS="$HERE/../../tools/chaos/phx-chaos"
PY=${PYTHON:-python3}
T=$(mktemp -d "${TMPDIR:-/tmp}/phx_chaos.XXXXXX") || exit 1
: >"$T/spawned"
cleanup() {
    for _p in $(cat "$T/spawned"); do kill -9 "$_p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
PASS=0
FAIL=0

ok() { PASS=$((PASS + 1)); echo "ok   $1"; }
bad() {
    FAIL=$((FAIL + 1)); echo "FAIL $1"
    for f in out err; do [ -s "$T/$f" ] && { echo "  --- $f:"; head -20 "$T/$f" | sed 's/^/  /'; }; done
}
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
# chaos ARGS...: phx-chaos with stdout/stderr captured, status in $RC. A
# signal takes effect when its target next runs, which under load is later
# than kill() returning: wait (bounded) for each delivered signal's effect,
# so that the checks see its outcome, not a race with the scheduler.
chaos() {
    "$PY" "$CHAOS" "$@" >"$T/out" 2>"$T/err"; RC=$?
    sed -n 's/^phx-chaos: +[0-9.]*s SIG\([A-Z]*\) rank [0-9]* pid \([0-9]*\)$/\1 \2/p' "$T/out" |
        while read -r _s _p; do settled "$_s" "$_p"; done
}
# settled SIG PID: up to 10 s for KILL (dead), STOP (state T), CONT (not T).
settled() {
    _n=500
    while [ $_n -gt 0 ]; do
        case $1 in
        KILL) alive "$2" || return 0 ;;
        STOP) [ "$(state "$2")" = T ] && return 0 ;;
        CONT) [ "$(state "$2")" != T ] && return 0 ;;
        esac
        sleep 0.02; _n=$((_n - 1))
    done
}
# Orphaned on purpose (started from a subshell): no job-control noise, reaped by init.
# Long enough to outlive the whole test under any load; cleanup kills them.
spawn() { LAST=$(sleep 3600 >/dev/null 2>&1 & echo $!); echo "$LAST" >>"$T/spawned"; }
# A zombie (killed child not yet reaped by this shell) counts as dead.
alive() { kill -0 "$1" 2>/dev/null && ! grep -q '^[0-9]* (.*) [ZX]' "/proc/$1/stat" 2>/dev/null; }
state() { sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null; }
# job N [HOST]: N fresh sleeps as ranks 0..N-1 in $T/pf; pid of rank r in $T/pid.r
job() {
    rm -f "$T/pf" "$T/kl"
    _i=0
    while [ $_i -lt "$1" ]; do
        spawn; echo "$_i $LAST ${2:-127.0.0.1}" >>"$T/pf"; echo $LAST >"$T/pid.$_i"; _i=$((_i + 1))
    done
    NRANKS=$1
}
pid() { cat "$T/pid.$1"; }
# dead_ranks: the job's ranks that are no longer alive, space separated
dead_ranks() {
    _i=0; _d=""
    while [ $_i -lt "$NRANKS" ]; do alive "$(pid $_i)" || _d="$_d $_i"; _i=$((_i + 1)); done
    echo $_d
}
# planned: the ranks in the plan printed by the last run, in plan order
planned() { grep -o 'SIG[A-Z]* rank [0-9]*' "$T/out" | awk '!s[$0]++ { print $3 }' | tr '\n' ' ' | sed 's/ $//'; }
sorted() { echo "$@" | tr ' ' '\n' | sort -n | tr '\n' ' ' | sed 's/ $//'; }
now_ns() { "$PY" -c 'import time; print(time.time_ns())'; }

spawn; DECOY=$LAST

# ---- command line ------------------------------------------------------------
chaos --help; check "--help exits 0 and shows the modes" '[ $RC = 0 ] && grep -q during-recovery "$T/out"'
chaos adjacent --help; check "mode --help" '[ $RC = 0 ] && grep -q -- --eventlog "$T/out"'
chaos rank 1; check "missing --pidfile is a usage error" '[ $RC = 2 ]'
chaos --pidfile "$T/pf" --at 1 --window 0 1 rank 1; check "--at and --window exclusive" '[ $RC = 2 ]'

# ---- rank --------------------------------------------------------------------
job 4
chaos --pidfile "$T/pf" --log "$T/kl" rank 2
check "rank 2: exit 0, exactly rank 2 dead" '[ $RC = 0 ] && [ "$(dead_ranks)" = "2" ]'
check "rank 2: decoy alive" 'alive $DECOY'
check "rank 2: kill log is one well-formed record" \
    '[ $(wc -l <"$T/kl") = 1 ] && "$PY" -c "import json,sys; e=json.loads(open(sys.argv[1]).read())
assert e[\"ev\"]==\"kill\" and e[\"rank\"]==2 and e[\"pid\"]==$(pid 2) and e[\"signal\"]==\"SIGKILL\"
assert isinstance(e[\"t\"], int) and e[\"t\"] > 10**18" "$T/kl"'
chaos --pidfile "$T/pf" --log "$T/kl" rank 2
check "rank already gone: exit 1 with a message" '[ $RC = 1 ] && grep -q "already" "$T/err" && [ $(wc -l <"$T/kl") = 1 ]'
chaos --pidfile "$T/pf" rank 7
check "rank not in pidfile: refused" '[ $RC = 2 ] && [ "$(dead_ranks)" = "2" ]'
chaos --pidfile "$T/pf" --log "$T/kl" rank 1 3
check "rank 1 3 (options before the mode)" '[ $RC = 0 ] && [ "$(dead_ranks)" = "1 2 3" ] && [ $(wc -l <"$T/kl") = 3 ]'
job 3
T0=$(now_ns)
chaos rank 1 --pidfile "$T/pf" --at 0.4 --log "$T/kl"
# Not before the planned time; how late depends on the load, so no upper bound.
check "rank with --at 0.4 (options after the mode): not before +0.4 s" \
    '[ $RC = 0 ] && [ "$(dead_ranks)" = "1" ] && "$PY" -c "import json,sys
assert json.loads(open(sys.argv[1]).read())[\"t\"] >= int(sys.argv[2]) + 4 * 10**8" "$T/kl" "$T0"'

# ---- random ------------------------------------------------------------------
job 5
chaos --pidfile "$T/pf" --seed 5 random -k 2
P=$(sorted "$(planned)")
check "random -k 2: exit 0, the two planned ranks and only them" \
    '[ $RC = 0 ] && [ "$(dead_ranks)" = "$P" ] && [ $(echo $P | wc -w) = 2 ] && alive $DECOY'
check "random: prints the seed" 'grep -q "seed 5" "$T/out"'
zero=0
for s in 1 2 3 4 5 6 7 8; do
    chaos --pidfile "$T/pf" --seed $s --dry-run random -k 3
    case " $(planned) " in *" 0 "*) zero=1 ;; esac
done
check "random never chooses rank 0 (8 seeds, k=3 of 4 eligible)" '[ $zero = 0 ]'
chaos --pidfile "$T/pf" --dry-run random -k 5
check "random -k 5 without --allow-root: refused" '[ $RC = 2 ] && grep -q allow-root "$T/err"'
chaos --pidfile "$T/pf" --dry-run --allow-root random -k 5
check "random -k 5 --allow-root: planned" '[ $RC = 0 ] && [ "$(sorted "$(planned)")" = "0 1 2 3 4" ]'

# ---- replay -----------------------------------------------------------------------
chaos --pidfile "$T/pf" --seed 42 --dry-run random -k 2 --window 0 5; cp "$T/out" "$T/plan1"
chaos --pidfile "$T/pf" --seed 42 --dry-run random -k 2 --window 0 5
check "same seed, same plan (ranks and times)" 'cmp -s "$T/out" "$T/plan1"'
: >"$T/plans"
for s in 1 2 3 4; do
    chaos --pidfile "$T/pf" --seed $s --dry-run random -k 2 --window 0 5; grep "^  +" "$T/out" >>"$T/plans"
done
check "different seeds, different plans" '[ $(sort -u "$T/plans" | wc -l) -gt 2 ]'
chaos --pidfile "$T/pf" --dry-run random
S=$(sed -n 's/.*seed \([0-9]*\).*/\1/p' "$T/out"); cp "$T/out" "$T/plan1"
chaos --pidfile "$T/pf" --dry-run --seed "$S" random
check "no seed: the printed seed replays the plan" '[ -n "$S" ] && cmp -s "$T/out" "$T/plan1"'
check "dry runs signalled nothing" '[ "$(dead_ranks)" = "$P" ]'

# ---- burst -------------------------------------------------------------------------
job 6
T0=$(now_ns)
chaos --pidfile "$T/pf" --seed 9 --window 0.1 0.3 --log "$T/kl" burst 3
P=$(sorted "$(planned)")
check "burst 3: exactly the planned ranks, rank 0 and decoy alive" \
    '[ $RC = 0 ] && [ "$(dead_ranks)" = "$P" ] && [ $(echo $P | wc -w) = 3 ] && alive $(pid 0) && alive $DECOY'
check "burst 3: one instant in the plan" '[ $(grep "^  +" "$T/out" | cut -d" " -f3 | sort -u | wc -l) = 1 ]'
check "burst 3: three kill records, none before the window" \
    '"$PY" -c "import json,sys; t=[json.loads(l)[\"t\"] for l in open(sys.argv[1])]; assert len(t)==3 and min(t) >= int(sys.argv[2]) + 10**8" "$T/kl" "$T0"'

# ---- adjacent ------------------------------------------------------------------------
job 6
RING="0,3,1,4,2,5"
for r in 0 1 2 3 4 5; do
    echo "{\"t\":1,\"rank\":$r,\"ev\":\"start\",\"size\":6,\"ring\":[$RING]}" >"$T/ev.$r.jsonl"
done
echo 'not json' >>"$T/ev.4.jsonl"
adj_ok=1
for s in 1 2 3 4 5; do
    chaos --pidfile "$T/pf" --seed $s --dry-run adjacent 2 --eventlog "$T/ev.%r.jsonl"
    case ",$RING,$RING," in *",$(planned | tr ' ' ','),"*) ;; *) adj_ok=0 ;; esac
    case " $(planned) " in *" 0 "*) adj_ok=0 ;; esac
    [ $RC = 0 ] || adj_ok=0
done
check "adjacent 2: consecutive in the ring order, never rank 0 (5 seeds)" '[ $adj_ok = 1 ]'
check "adjacent: malformed event line reported with file:line" 'grep -q "ev.4.jsonl:2:" "$T/err"'
chaos --pidfile "$T/pf" --seed 3 adjacent 3 --eventlog "$T/ev.%r.jsonl"
P=$(planned)
check "adjacent 3: kills the 3 planned consecutive ranks only" \
    '[ $RC = 0 ] && [ "$(dead_ranks)" = "$(sorted "$P")" ] && alive $DECOY &&
     case ",$RING,$RING," in *",$(echo $P | tr " " ","),"*) true ;; *) false ;; esac'
chaos --pidfile "$T/pf" --dry-run adjacent 6 --eventlog "$T/ev.%r.jsonl"
check "adjacent 6 of 6 without --allow-root: refused" '[ $RC = 2 ]'
chaos --pidfile "$T/pf" --timeout 0.3 adjacent 2 --eventlog "$T/none.%r.jsonl"
check "adjacent without start events: timeout exit 3" '[ $RC = 3 ]'

# ---- during-recovery --------------------------------------------------------------------
job 4
rm -f "$T"/ev.*
( # a fake survivor: rank 3 logs a suspect of rank 1 once rank 1 is dead
    while alive "$(pid 1)"; do sleep 0.02; done
    printf '{"t":%s,"rank":3,"ev":"unknown-future-event"}\n{"t":%s,"rank":3,"ev":"suspect","dead":1}\n' \
        "$(now_ns)" "$(now_ns)" >>"$T/ev.3.jsonl"
) &
chaos --pidfile "$T/pf" --log "$T/kl" --timeout 60 during-recovery --first 1 --second 2 --eventlog "$T/ev.%r.jsonl"
wait $! 2>/dev/null
check "during-recovery: both killed, in order, second after the suspect" \
    '[ $RC = 0 ] && [ "$(dead_ranks)" = "1 2" ] && alive $DECOY && "$PY" -c "import json,sys
k=[json.loads(l) for l in open(sys.argv[1])]; s=[json.loads(l) for l in open(sys.argv[2])][-1]
assert [e[\"rank\"] for e in k]==[1,2] and k[1][\"t\"] >= s[\"t\"] >= k[0][\"t\"]" "$T/kl" "$T/ev.3.jsonl"'
job 4
rm -f "$T"/ev.*
echo '{"t":5,"rank":3,"ev":"suspect","dead":1}' >"$T/ev.3.jsonl"   # stale: before the kill
chaos --pidfile "$T/pf" --seed 1 --timeout 0.5 during-recovery --eventlog "$T/ev.%r.jsonl"
check "during-recovery: no detection after the kill -> exit 3, one kill only" \
    '[ $RC = 3 ] && [ $(echo $(dead_ranks) | wc -w) = 1 ] && alive $(pid 0)'

# ---- STOP / CONT ------------------------------------------------------------------------------
job 3
chaos --pidfile "$T/pf" --signal STOP --log "$T/kl" rank 1
check "--signal STOP stops the process" '[ $RC = 0 ] && [ "$(state $(pid 1))" = T ]'
chaos --pidfile "$T/pf" --signal cont --log "$T/kl" rank 1
check "--signal cont resumes it; kill log names the signals" \
    '[ $RC = 0 ] && [ "$(state $(pid 1))" != T ] && grep -q SIGSTOP "$T/kl" && grep -q SIGCONT "$T/kl"'

# ---- safety -------------------------------------------------------------------------------------
job 3
sed 's/^1 \([0-9]*\) .*/1 \1 node7.example/' "$T/pf" >"$T/pf2" && mv "$T/pf2" "$T/pf"
chaos --pidfile "$T/pf" rank 1
check "non-local host: refused with a clear message, nothing killed" \
    '[ $RC = 2 ] && grep -q "not local" "$T/err" && [ -z "$(dead_ranks)" ]'
chaos --pidfile "$T/pf" --allow-root burst 3
check "non-local host in a burst: refused before any kill" '[ $RC = 2 ] && [ -z "$(dead_ranks)" ]'
job 2 localhost
chaos --pidfile "$T/pf" rank 1
check "localhost is local" '[ $RC = 0 ] && [ "$(dead_ranks)" = 1 ]'
printf '0 1 127.0.0.1\n' >"$T/pf"
chaos --pidfile "$T/pf" --allow-root rank 0
check "pid 1 refused" '[ $RC = 2 ]'
printf '0 12 127.0.0.1 extra\n' >"$T/pf"
chaos --pidfile "$T/pf" --allow-root rank 0
check "malformed pidfile: exit 2 with file:line" '[ $RC = 2 ] && grep -q "pf:1" "$T/err"'
job 2
touch -d "@$(( $(date +%s) - 100 ))" "$T/pf"
chaos --pidfile "$T/pf" rank 1
check "stale pidfile (pid newer than the file): not signalled, exit 1" \
    '[ $RC = 1 ] && grep -q "stale" "$T/err" && [ -z "$(dead_ranks)" ]'

# ---- waiting for the pidfile ---------------------------------------------------------------------
job 2
mv "$T/pf" "$T/pf.later"
(sleep 0.5; mv "$T/pf.later" "$T/pf") &
chaos --pidfile "$T/pf" --wait-pidfile 60 rank 1
wait $! 2>/dev/null
check "--wait-pidfile: waits for the pidfile, then kills" '[ $RC = 0 ] && [ "$(dead_ranks)" = 1 ]'
rm -f "$T/pf"
chaos --pidfile "$T/pf" --wait-pidfile 0.3 rank 1
check "--wait-pidfile timeout: exit 3" '[ $RC = 3 ] && grep -q "did not appear" "$T/err"'

# ---- --start-on and --gate: kills triggered by the job's own events -------------------------------
job 4
rm -f "$T"/ev.* "$T/go"
chaos --pidfile "$T/pf" --start-on busy_spin rank 3
check "--start-on without --eventlog: usage error" '[ $RC = 2 ] && [ -z "$(dead_ranks)" ]'
"$PY" "$CHAOS" --pidfile "$T/pf" --eventlog "$T/ev.%r.jsonl" --start-on busy_spin --start-ranks 1,2 \
    --timeout 30 --gate "$T/go" --log "$T/kl" rank 3 >"$T/out" 2>"$T/err" &
CP=$!
printf '{"t":%s,"rank":1,"ev":"busy_spin"}\n' "$(now_ns)" >>"$T/ev.1.jsonl"
# Rank 2 has not logged it: whenever chaos looks, it must not have signalled.
check "--start-on: nothing signalled, gate closed while rank 2 has not logged the event" \
    '[ -z "$(dead_ranks)" ] && [ ! -e "$T/go" ]'
T0=$(now_ns)
printf '{"t":%s,"rank":2,"ev":"busy_spin","extra":[1]}\n' "$T0" >>"$T/ev.2.jsonl"
wait $CP; RC=$?
check "--start-on busy_spin --start-ranks 1,2: rank 3 killed after rank 2's event, then the gate opened" \
    '[ $RC = 0 ] && [ "$(dead_ranks)" = 3 ] && [ -e "$T/go" ] && grep -q "gate .* opened" "$T/out" &&
     "$PY" -c "import json,sys; assert json.loads(open(sys.argv[1]).read())[\"t\"] >= int(sys.argv[2])" "$T/kl" "$T0"'
rm -f "$T/go"
chaos --pidfile "$T/pf" --eventlog "$T/ev.%r.jsonl" --start-on never --timeout 0.3 --gate "$T/go" rank 2
check "--start-on timeout: exit 3, nothing signalled, gate opened (the job is not left hanging)" \
    '[ $RC = 3 ] && [ "$(dead_ranks)" = 3 ] && [ -e "$T/go" ]'
chaos --pidfile "$T/pf" --eventlog "$T/ev.%r.jsonl" --start-on busy_spin --start-ranks 9 rank 2
check "--start-ranks not in the pidfile: refused" '[ $RC = 2 ] && [ "$(dead_ranks)" = 3 ]'

check "decoy survived everything" 'alive $DECOY'
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
