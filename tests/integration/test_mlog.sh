#!/bin/bash
# Message logging (issue 11) on 8 loopback nodes, 2 workers each, jacobi.
# Forward path: sender logs, determinants at every delivery (per-worker
# lock-free queues), causal trailers (or the pessimistic flush to the next
# live rank) and acks, logs emptied at each committed checkpoint.
# Recovery under mlog-causal: one kill restores only the dead node's tasks
# (spread over the survivors), survivors hand back dets and logged
# messages, the restored tasks replay in the recorded order, survivors drop
# the re-sent messages and never go back; a second failure, and any failure
# under mlog-pessimistic, falls back to cr's global rollback; a node lost
# with its buddy ends with 78. mlog-fast (jacobi -T): no determinants, the
# same recoveries, and a type not declared receive-deterministic refused.
# Every result equals the fault-free checksum.
# Kills land between two checkpoints by construction: the app holds the
# checkpoint due after iteration (tick) H, and its end, on a gate file
# (-H H -g FILE); the test waits for the hold and for every node's last
# checkpoint to be committed, kills, waits for the victims to be gone and
# for rank 0's recovery round to end (or the job), then opens the gate.
# Usage: test_mlog.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
N=8
HB=$(hb_ms)
export PHX_HB_TIMEOUT=$HB PHX_WORKERS=2
unset PHX_HB_PERIOD PHX_TD PHX_CKPT_DIE
ARGS="-N 256 -i 2000 -c 100"
# Pessimistic logging waits a round trip per delivery: a shorter run.
ARGS_P="-N 128 -i 500 -c 50"
KILL_AT=350   # the kill cases: checkpoints every 100, the one at 400 held
JOB_TIMEOUT=$((60 + 10 * HB / 1000))

seqsum() { "$BIN/jacobi" --seq "$@" -P $N | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p'; }
ref_c=$(seqsum $ARGS)
ref_p=$(seqsum $ARGS_P)
[ -n "$ref_c" ] && [ -n "$ref_p" ] || { echo "FAIL - jacobi --seq printed no checksum"; exit 1; }
echo "reference checksums $ref_c (causal), $ref_p (pessimistic)"

start() {   # start NAME MODE [ARGS...]: the job in the background (JOBPID, DIR)
    DIR=$TMP/$1; mode=$2; shift 2
    mkdir -p "$DIR"
    timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" --pidfile "$DIR/pids" "$BIN/jacobi" \
        --phx-ft=1 --phx-recovery="$mode" --phx-eventlog="$DIR/ev.%r.jsonl" "$@" \
        >"$DIR/out" 2>"$DIR/err" &
    JOBPID=$!
}
logged() { grep -qs "$1" "$DIR"/ev.*.jsonl; }
# finish_job: waits (RC); a failed job shows the end of its stderr.
finish_job() {
    wait "$JOBPID"; RC=$?
    [ "$RC" = 0 ] || tail -8 "$DIR/err" | sed 's/^/  err: /'
}
sum_of() { sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' "$DIR/out" | tail -1; }
# every_node EVENT FIELD: each node's EVENT has FIELD > 0
every_node() {
    for r in $(seq 0 $((N - 1))); do
        grep -s "\"ev\":\"$1\"" "$DIR/ev.$r.jsonl" | grep -q "\"$2\":[1-9]" || return 1
    done
}

# every_ge1 EVENT FIELD: some node's EVENT has FIELD > 0
every_ge1() { grep -hs "\"ev\":\"$1\"" "$DIR"/ev.*.jsonl | grep -q "\"$2\":[1-9]"; }

for mode in mlog-causal mlog-pessimistic; do
    if [ $mode = mlog-causal ]; then a=$ARGS; ref=$ref_c; else a=$ARGS_P; ref=$ref_p; fi
    start "clean-$mode" "$mode" $a
    finish_job
    check "$mode fault-free: exit 0 (got $RC)" [ "$RC" = 0 ]
    check "$mode fault-free: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
    check "$mode: every node made determinants" every_node mlog_stats dets
    check "$mode: every node stored others' determinants" every_node mlog_stats dets_stored
    check "$mode: every node logged remote messages" every_node mlog_stats logged
    # 004a R1: the log fills during a period and each commit empties it:
    # the sizes seen at the commits add up to at most what was logged in
    # all (never emptied, they would add up to many times that).
    check "$mode: rank 0's log is emptied at every commit" python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
gc = [e["log_len"] for e in ev if e["ev"] == "mlog_gc"][1:]   # epoch 1: the job start
total = sum(e["logged"] for e in ev if e["ev"] == "mlog_stats")
ok = len(gc) >= 3 and max(gc) > 0 and sum(gc) <= total
if not ok:
    print("  log sizes at commits", gc, "logged in all", total)
sys.exit(not ok)' "$DIR/ev.0.jsonl"
done
check "mlog-pessimistic: app frames carried no determinants" eval \
    '! grep -h "\"ev\":\"mlog_stats\"" "$DIR"/ev.*.jsonl | grep -qv "\"piggybacked_on_app\":0"'

# settled MIN: every node's last checkpoint round is committed, MIN or more
# committed in all (the job's start is the first).
settled() {
    for r in $(seq 0 $((N - 1))); do
        f=$DIR/ev.$r.jsonl
        [ "$(grep -Eo '"ev":"ckpt_(begin|commit)"' "$f" 2>/dev/null | tail -1)" = '"ev":"ckpt_commit"' ] &&
            [ "$(grep -c '"ev":"ckpt_commit"' "$f")" -ge "$1" ] || return 1
    done
}
# kill_held NAME MIN RANK...: once the job logged its hold and MIN
# checkpoints settled, SIGKILL those ranks; once they are gone and rank 0
# ended its recovery round (or the job ended), open the gate; wait.
kill_held() {
    name=$1; min=$2; shift 2
    wait_for "$JOB_TIMEOUT" logged '"ev":"[a-z]*_hold"' || fail "$name: the hold never logged"
    wait_for "$JOB_TIMEOUT" settled "$min" || fail "$name: checkpoints never settled"
    wait_for 5 test -s "$DIR/pids"
    p=""
    for r in "$@"; do p="$p $(awk -v r="$r" '$1 == r { print $2 }' "$DIR/pids")"; done
    kill -9 $p
    for x in $p; do gone "$x" $((JOB_TIMEOUT * 1000)) || fail "$name: rank pid $x outlived SIGKILL"; done
    wait_for "$JOB_TIMEOUT" eval 'grep -qs "\"ev\":\"recovery_done\"" "$DIR/ev.0.jsonl" || ! kill -0 "$JOBPID" 2>/dev/null'
    gate_open "$GATE"
    finish_job
}
# kill_job NAME MODE RANK...: the checkpoint after iteration KILL_AT is
# held; kill those ranks after the one before it committed.
kill_job() {
    name=$1; mode=$2; shift 2
    GATE=$(gate_new "$name")
    start "$name" "$mode" $ARGS -H $KILL_AT -g "$GATE"
    kill_held "$name" 2 "$@"
}
# monotone: in every node's log, each block's iterations only go up (a
# survivor never rolls back; a restored block starts anew on its new host).
monotone() {
    python3 - "$DIR" "$N" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
for r in range(n):
    try:
        lines = open("%s/ev.%d.jsonl" % (d, r))
    except OSError:
        continue
    last = {}
    for l in lines:
        e = json.loads(l)
        if e["ev"] != "jacobi_blk":
            continue
        if e["iter"] <= last.get(e["blk"], 0):
            print("  rank %d block %d went back from %d to %d" % (r, e["blk"], last[e["blk"]], e["iter"]))
            sys.exit(1)
        last[e["blk"]] = e["iter"]
PY
}
ref=$ref_c

# ---- parallel recovery: only the dead node's tasks restart -------------------
kill_job kill mlog-causal 3
check "mlog-causal one kill: exit 0 (got $RC)" [ "$RC" = 0 ]
check "mlog-causal one kill: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
check "mlog-causal one kill: a partial restore, no rollback anywhere" eval \
    'logged "\"ev\":\"partial_restore\"" && ! logged "\"ev\":\"rollback\""'
check "mlog-causal one kill: only rank 3's tasks were restored" eval \
    'logged "\"source\":\"buddy\",\"of\":3," && ! logged "\"source\":\"local\""'
hosts=$(grep -ls '"ev":"restore","tasks":[1-9][0-9]*,"source":"buddy","of":3,' "$DIR"/ev.*.jsonl | wc -l)
check "mlog-causal one kill: its tasks spread over several survivors ($hosts)" [ "$hosts" -ge 2 ]
check "mlog-causal one kill: survivors handed back logged messages" every_ge1 mlog_handback msgs
check "mlog-causal one kill: replays followed installed determinants" every_ge1 mlog_replay dets_installed
check "mlog-causal one kill: survivors dropped re-sent messages as duplicates" every_ge1 mlog_recovery dups
check "mlog-causal one kill: no block ever went back on any node" monotone
# The control: under cr the same kill makes every survivor reload its own
# copy (the events the mlog run must not have).
kill_job cr-kill cr 3
locals=$(grep -ls '"source":"local"' "$DIR"/ev.*.jsonl | wc -l)
check "cr one kill (control): checksum right, all 7 survivors reloaded ($locals)" eval \
    '[ "$(sum_of)" = "$ref" ] && [ "$locals" = 7 ]'

# ---- recovery-helpers=2: rank 3's tasks go to its buddy and the next rank -----
ARGS_SAVE=$ARGS; ARGS="$ARGS -V 8 --phx-recovery-helpers=2"
ref_v8=$(seqsum $ARGS_SAVE -V 8)
kill_job helpers mlog-causal 3
ARGS=$ARGS_SAVE
check "mlog-causal, recovery-helpers=2, one kill: exit 0 (got $RC), checksum equals the reference" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref_v8" ]'
check "mlog-causal, recovery-helpers=2: a partial restore, no rollback anywhere" eval \
    'logged "\"ev\":\"partial_restore\"" && ! logged "\"ev\":\"rollback\""'
# The buddy logs its restore without "via"; the other helper is the next
# live rank after it. Both host some of rank 3's 8 blocks, nobody else does.
check "mlog-causal, recovery-helpers=2: rank 3's 8 tasks restored on its buddy and the next rank only" \
    python3 - "$DIR" "$N" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
got, buddy = {}, None
for r in range(n):
    try:
        lines = open("%s/ev.%d.jsonl" % (d, r)).readlines()
    except OSError:
        continue
    for l in lines:
        e = json.loads(l)
        if e["ev"] == "restore" and e.get("of") == 3:
            got[r] = got.get(r, 0) + e["tasks"]
            if "via" not in e:
                buddy = r
want = {buddy, (buddy + 1) % n if (buddy + 1) % n != 3 else (buddy + 2) % n} if buddy is not None else set()
ok = set(got) == want and len(want) == 2 and all(got[r] > 0 for r in got) and sum(got.values()) == 8
if not ok:
    print("  restored tasks of rank 3 per host", got, "buddy", buddy, "expected hosts", sorted(want))
sys.exit(not ok)
PY
check "mlog-causal, recovery-helpers=2: no block ever went back on any node" monotone
# Negative is refused at startup, naming the key.
timeout -k 5 60 "$PHX" run -n 2 "$BIN/jacobi" --phx-ft=1 --phx-recovery=mlog-causal --phx-recovery-helpers=-1 \
    -N 64 -i 10 >"$TMP/out" 2>"$TMP/err"
rc=$?
check "recovery-helpers=-1 is refused (exit $rc)" eval \
    '[ $rc = 2 ] && grep -q "bad value .-1. for option recovery-helpers.*expected a whole number of nodes >= 0" "$TMP/err"'

# ---- order-sensitive app: racing senders, hash chains, routes by hash ------------
# (apps/order: main checks that every sender's stream equals what its
# receiver used; an orphan after a wrong replay makes it exit 3.)
# -c 0: no application checkpoint, so the replay runs from the job's start
# and re-spawns the dead node's tasks; -c 50: from a recent checkpoint.
# -L 1: START passes along a line of tasks, so most tasks get tokens before
# START (kept until it comes; a replay must keep them in the same order).
for c in "0" "50" "0 -L 1"; do
    DIR=$TMP/order-${c// /}; mkdir -p "$DIR"
    GATE=$(gate_new "order-${c// /}")
    timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" --pidfile "$DIR/pids" "$BIN/order" --phx-ft=1 \
        --phx-recovery=mlog-causal --phx-eventlog="$DIR/ev.%r.jsonl" -k 400 -c $c -H 120 -g "$GATE" \
        >"$DIR/out" 2>"$DIR/err" &
    JOBPID=$!
    if [ "${c%% *}" = 0 ]; then min=1; else min=2; fi
    kill_held "order -c $c" $min 3
    check "order -c $c, one kill: exit 0 and consistent (got $RC)" eval \
        '[ "$RC" = 0 ] && grep -q "consistent=yes" "$DIR/out"'
    check "order -c $c, one kill: replayed by determinants, no rollback" eval \
        'every_ge1 mlog_replay dets_installed && ! logged "\"ev\":\"rollback\""'
done

# ---- fallbacks ----------------------------------------------------------------
ARGS_SAVE=$ARGS; ARGS=$ARGS_P; ref=$ref_p; KILL_AT=75
kill_job pkill mlog-pessimistic 3
check "mlog-pessimistic one kill: exit 0, checksum equals the reference" eval '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "mlog-pessimistic one kill: partial restore and replay, no rollback" eval \
    'logged "\"ev\":\"partial_restore\"" && ! logged "\"ev\":\"rollback\"" && every_ge1 mlog_replay dets_installed'
check "mlog-pessimistic one kill: no block ever went back on any node" monotone
ARGS=$ARGS_SAVE; ref=$ref_c; KILL_AT=350
kill_job two mlog-causal 1 5
check "mlog-causal two kills at once (1, 5): exit 0, checksum equals the reference" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "mlog-causal two kills: the second fell back to the global rollback" logged '"ev":"mlog_fallback"'
kill_job pair mlog-causal 3 4
check "mlog-causal node + buddy (3, 4): exit 78 naming both, no checksum" eval \
    '[ "$RC" = 78 ] && grep -qs "rank 3 and its buddy rank 4 both died" "$DIR/err" && [ -z "$(sum_of)" ]'

# ---- mlog-fast: no determinants; jacobi -T (tagged, receive-deterministic) ----
# Restored tasks take survivors' re-sent messages in any order; their tag
# boxes and the SSN streams drop what was delivered before.
start clean-fast mlog-fast $ARGS -T
finish_job
check "mlog-fast fault-free: exit 0, checksum $(sum_of) equals the reference $ref" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "mlog-fast: every node logged remote messages" every_node mlog_stats logged
check "mlog-fast: no determinant made, stored or carried anywhere" eval \
    '! grep -h "\"ev\":\"mlog_stats\"" "$DIR"/ev.*.jsonl | grep -v "\"dets\":0,.*\"dets_stored\":0,.*\"piggybacked_on_app\":0"'
ARGS_SAVE=$ARGS; ARGS="$ARGS -T"
kill_job fkill mlog-fast 3
check "mlog-fast one kill: exit 0 (got $RC), checksum $(sum_of) equals the reference" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "mlog-fast one kill: a partial restore of rank 3's tasks, no rollback anywhere" eval \
    'logged "\"ev\":\"partial_restore\"" && ! logged "\"ev\":\"rollback\"" && logged "\"source\":\"buddy\",\"of\":3,"'
check "mlog-fast one kill: survivors handed back logged messages, no determinants" eval \
    'every_ge1 mlog_handback msgs && ! every_ge1 mlog_handback dets'
check "mlog-fast one kill: survivors dropped re-sent messages as duplicates" every_ge1 mlog_recovery dups
check "mlog-fast one kill: no block ever went back on any node" monotone
kill_job ftwo mlog-fast 1 5
check "mlog-fast two kills at once (1, 5; not buddies): exit 0 (got $RC), checksum equals the reference" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "mlog-fast two kills: the second fell back to the global rollback" logged '"ev":"mlog_fallback"'
ARGS=$ARGS_SAVE
# Never a wrong answer: a type not declared receive-deterministic is refused.
timeout -k 5 60 "$PHX" run -n 2 "$BIN/jacobi" --phx-ft=1 --phx-recovery=mlog-fast -N 64 -i 10 >"$TMP/out" 2>"$TMP/err"
rc=$?
check "mlog-fast refuses jacobi without -T (exit $rc)" eval \
    '[ $rc = 2 ] && grep -q "mlog-fast needs receive-deterministic task types; type .jacobi_block." "$TMP/err"'

# A typo is refused and the valid names are listed.
timeout -k 5 60 "$PHX" run -n 2 "$BIN/jacobi" --phx-ft=1 --phx-recovery=mlog-bogus -N 64 -i 10 >"$TMP/out" 2>"$TMP/err"
rc=$?
check "an unknown mode lists the mlog ones" eval \
    '[ $rc = 2 ] && grep -q "unknown recovery mode .mlog-bogus. (none|cr|mlog-causal|mlog-pessimistic|mlog-fast)" "$TMP/err"'
finish
