#!/bin/bash
# Stalls decide nothing by luck. 3 loopback nodes, busy,
# PHX_FT=1. In the event-log ring, A = rank 0 observes B, B observes C.
#   (1) B is SIGSTOPped for 2 delta while C is SIGKILLed, and A itself is
#       stopped for delta/4 at the same moment (a loaded survivor whose timer
#       ran late). A declares B (its silent emitter) and then C. B is SIGCONTed
#       once A's notice of B is logged (and 2 delta after its stop): it was
#       declared, so it must fence (exit 75); A must not fence itself, though
#       its only other peer's connection is gone too.
#   (2) B is SIGKILLed while C is stopped for 2 delta: A declares B and makes
#       C its emitter with 2 delta of grace. C is SIGCONTed after A's notice
#       of B (and 2 delta after its stop): it survives or is fenced, but the
#       same everywhere.
# Both: every node either is in the survivors' (common) dead set and exited
# 75 (or was killed), or survived with exit 0 and that same dead set.
# Usage: test_ft_stall.sh BINDIR. Env: PHX_HB_TIMEOUT (delta, ms; default
# 1000; every wait derives from it).
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
DELTA_MS=${PHX_HB_TIMEOUT:-1000}
unset PHX_TD PHX_FT PHX_EVENTLOG PHX_HB_PERIOD PHX_WORKERS
export PHX_TD=none PHX_FT=1 PHX_HB_TIMEOUT=$DELTA_MS PHX_WORKERS=1
echo "# 3 nodes, delta=${DELTA_MS}ms"
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
poll_ms() {
    local end=$(( $(now_ms) + $1 )); shift
    while [ "$(now_ms)" -lt "$end" ]; do "$@" && return 0; sleep 0.02; done
    "$@"
}
sleep_ms() { [ "$1" -gt 0 ] && sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; return 0; }
ev() { cat "$JOB"/ev.*.jsonl 2>/dev/null | grep "\"ev\":\"$1\"" | grep -c -- "${2:-}"; }
all_started() { [ "$(ev start)" -ge 3 ]; }
pid_of() { awk -v r="$1" '$1 == r { print $2 }' "$JOB/pids"; }
noticed() { grep -q "\"ev\":\"notice\",\"dead\":$2," "$JOB/ev.$1.jsonl" 2>/dev/null; }
exited() { grep -q '"ev":"exit"' "$JOB/ev.$1.jsonl" 2>/dev/null; }
code_of() { sed -n 's/.*"ev":"exit","code":\([0-9]*\).*/\1/p' "$JOB/ev.$1.jsonl" 2>/dev/null | head -n 1; }
dset_of() { sed -n 's/.*"ev":"notice","dead":\([0-9]*\),.*/\1/p' "$JOB/ev.$1.jsonl" 2>/dev/null |
            sort -n | tr '\n' ' '; }

# start_job NAME: busy for 8 delta, A/B/C from rank 0's start event.
start_job() {
    JOB=$TMP/$1; mkdir -p "$JOB"
    local secs=$(( (8 * DELTA_MS + 999) / 1000 ))
    PHX_EVENTLOG="$JOB/ev.%r.jsonl" timeout -k 5 $(( secs + 30 )) \
        "$PHX" run -n 3 --pidfile "$JOB/pids" "$BIN/busy" "$secs" 10 1 >"$JOB/out" 2>"$JOB/err" &
    L=$!; PIDS="$PIDS $L"
    poll_ms 30000 all_started || { fail "$1: all 3 nodes log start"; return 1; }
    # "ring":[r0,r1,r2]: ring[i] observes ring[i+1]; rotate to start at 0.
    read -r A B C < <(sed -n 's/.*"ev":"start".*"ring":\[\([0-9,]*\)\].*/\1/p' "$JOB/ev.0.jsonl" |
        awk -F, '{ for (i = 1; i <= 3; i++) if ($i == 0) { print $i, $(i % 3 + 1), $((i + 1) % 3 + 1) } }')
    echo "# $1: A=$A observes B=$B observes C=$C"
}

# verdict NAME KILLED: consistency of the outcome over all ranks.
verdict() {
    local name=$1 killed=$2 ok=1 d=""
    wait "$L"
    for r in 0 1 2; do
        [ "$r" = "$killed" ] && continue
        poll_ms 5000 exited "$r" || { fail "$name: rank $r logged its exit"; ok=0; }
    done
    for r in 0 1 2; do
        [ "$r" = "$killed" ] && continue
        local c; c=$(code_of "$r")
        echo "# $name: rank $r exit $c, dead set { $(dset_of "$r")}"
        if [ "$c" = 0 ]; then
            if [ -z "$d" ]; then d=$(dset_of "$r"); elif [ "$d" != "$(dset_of "$r")" ]; then
                fail "$name: survivors disagree on the dead set"; ok=0
            fi
        elif [ "$c" != 75 ]; then
            fail "$name: rank $r exited $c (neither survivor 0 nor fenced 75)"; ok=0
        fi
    done
    [ -n "$d" ] || { fail "$name: nobody survived"; ok=0; }
    for r in 0 1 2; do
        local in=0; case " $d" in *" $r "*) in=1 ;; esac
        if [ "$r" = "$killed" ]; then
            [ "$in" = 1 ] || { fail "$name: killed rank $r missing from { $d}"; ok=0; }
        elif [ "$(code_of "$r")" = 75 ] && [ "$in" = 0 ]; then
            fail "$name: rank $r fenced itself though no survivor declared it"; ok=0
        elif [ "$(code_of "$r")" = 0 ] && [ "$in" = 1 ]; then
            fail "$name: rank $r survived but the survivors declared it"; ok=0
        fi
    done
    [ "$ok" = 1 ] && ok "$name: every node survived with { $d} or is in it"
    [ "$ok" = 1 ] || { local k; k=$(mktemp -d "${TMPDIR:-/tmp}/phx-stall-fail.XXXXXX") &&
                       cp -r "$JOB"/. "$k" && echo "# $name: logs kept in $k"; }
}

# ---- (1) B stopped 2 delta, C killed, A late by delta/4 ---------------------
if start_job one; then
    t0=$(now_ms)
    kill -STOP "$(pid_of "$B")" "$(pid_of "$A")"; kill -KILL "$(pid_of "$C")"
    sleep_ms $(( DELTA_MS / 4 ))
    kill -CONT "$(pid_of "$A")"
    poll_ms $(( 4 * DELTA_MS + 5000 )) noticed "$A" "$B"
    check "one: A noticed B" noticed "$A" "$B"
    sleep_ms $(( t0 + 2 * DELTA_MS - $(now_ms) ))
    kill -CONT "$(pid_of "$B")"
    verdict one "$C"
    check "one: A survived" [ "$(code_of "$A")" = 0 ]
    check "one: B, declared while stopped, fenced (75)" [ "$(code_of "$B")" = 75 ]
fi

# ---- (2) B killed while C is stopped 2 delta ---------------------------------
if start_job two; then
    t0=$(now_ms)
    kill -STOP "$(pid_of "$C")"; kill -KILL "$(pid_of "$B")"
    poll_ms $(( 4 * DELTA_MS + 5000 )) noticed "$A" "$B"
    check "two: A noticed B" noticed "$A" "$B"
    sleep_ms $(( t0 + 2 * DELTA_MS - $(now_ms) ))
    kill -CONT "$(pid_of "$C")"
    verdict two "$B"
fi
finish
