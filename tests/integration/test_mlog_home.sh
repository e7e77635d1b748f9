#!/bin/bash
# Message logging with restart-on=respawn (parallel recovery's
# "then migrate home"), jacobi on 8 loopback nodes x 2 workers: one kill of
# rank 3 is recovered partially on helpers without waiting for its respawn;
# the new incarnation is taken in at a later commit hosting nothing, and the
# checkpoint after it moves rank 3's tasks home, so placement afterwards
# equals placement before. Survivors never go back, and no frame
# reaches a task's old host (the move happens at a cut: nothing to forward).
# A kill inside the moving checkpoint (PHX_CKPT_DIE=RANK:INC:shipped|moved)
# falls back to cr's global rollback with the right checksum.
# Kills land between two checkpoints by construction (jacobi -H/-g gate, as
# in test_mlog.sh).
# Usage: test_mlog_home.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
N=8
HB=$(hb_ms)
export PHX_HB_TIMEOUT=$HB PHX_WORKERS=2
unset PHX_HB_PERIOD PHX_TD PHX_CKPT_DIE PHX_RESTART_ON PHX_RESPAWN_MAX PHX_INCARNATION
ARGS="-N 256 -i 2000 -c 100 -V 8"
ARGS_P="-N 128 -i 500 -c 50 -V 8"   # pessimistic: a round trip per delivery
KILL_AT=350
JOB_TIMEOUT=$((60 + 10 * HB / 1000))

seqsum() { "$BIN/jacobi" --seq "$@" -P $N | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p'; }
ref=$(seqsum $ARGS)
ref_p=$(seqsum $ARGS_P)
[ -n "$ref" ] && [ -n "$ref_p" ] || { echo "FAIL - jacobi --seq printed no checksum"; exit 1; }

# run NAME MODE ARGS...: the checkpoint after iteration KILL_AT is held;
# once it is held and two checkpoints settled, rank 3 is killed; once it is
# gone and rank 0's round ended, the gate opens; waits (RC).
run() {
    name=$1; mode=$2; shift 2
    DIR=$TMP/$name; mkdir -p "$DIR"
    GATE=$(gate_new "$name")
    timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" --pidfile "$DIR/pids" "$BIN/${APP:-jacobi}" --phx-ft=1 \
        --phx-recovery="$mode" --phx-restart-on=respawn --phx-ckpt-interval=1 --phx-eventlog="$DIR/ev.%r.jsonl" "$@" \
        -H "${HOLD:-$KILL_AT}" -g "$GATE" >"$DIR/out" 2>"$DIR/err" &
    JOBPID=$!
    wait_for "$JOB_TIMEOUT" logged '"ev":"[a-z]*_hold"' || fail "$name: the hold never logged"
    wait_for "$JOB_TIMEOUT" settled 2 || fail "$name: checkpoints never settled"
    wait_for 5 test -s "$DIR/pids"
    p=$(awk '$1 == 3 { print $2 }' "$DIR/pids")
    kill -9 "$p"
    gone "$p" $((JOB_TIMEOUT * 1000)) || fail "$name: rank 3 outlived SIGKILL"
    wait_for "$JOB_TIMEOUT" eval 'grep -qs "\"ev\":\"recovery_done\"" "$DIR/ev.0.jsonl" || ! kill -0 "$JOBPID" 2>/dev/null'
    # The job's end waits for the gate while the runtime's checkpoints (one
    # a second) go on: one takes the respawn in, the next moves its tasks.
    wait_for "$JOB_TIMEOUT" eval 'grep -qs "\"ev\":\"home\"" "$DIR/ev.0.jsonl" || ! kill -0 "$JOBPID" 2>/dev/null' ||
        fail "$name: rank 3's tasks never moved home"
    gate_open "$GATE"
    wait "$JOBPID"; RC=$?
    [ "$RC" = 0 ] && return
    grep -v "status:" "$DIR/err" | tail -12 | sed 's/^/  err: /'
    grep -hs '"ev":"\(failure\|peer_back\|rejoin[a-z_]*\|migrate_[a-z]*\|home\|rollback\|ckpt_begin\|ckpt_commit\)"' \
        "$DIR"/ev.*.jsonl | sort | tail -40 | cut -c1-160 | sed 's/^/  ev: /'
}
sum_of() { sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' "$DIR/out" | tail -1; }
moved_home() {   # the tasks rank 3 took back at the moving checkpoint
    grep -hs '"ev":"migrate_in"' "$DIR/ev.3.jsonl" | sed -n 's/.*"tasks":\([0-9]*\).*/\1/p' | awk '{ s += $1 } END { print s + 0 }'
}
# placement: every block's last host is its first (the ranks' logs, in time
# order), and no block ever went back on a survivor (rank 3's log holds
# its incarnations one after the other: the first ran ahead of the
# restored copies it was killed with). "placement rollback": a case whose
# failure rolls back globally, where survivors go back by design (to the
# rollback's epoch), checks the hosts only.
placement() {
    python3 - "$DIR" "$N" "${1:-}" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
global_rb = sys.argv[3] == "rollback"
ev = []
for r in range(n):
    for l in open("%s/ev.%d.jsonl" % (d, r)):
        e = json.loads(l)
        if e["ev"] == "jacobi_blk":
            ev.append((e["t"], r, e["blk"], e["iter"]))
ev.sort()
first, last, top = {}, {}, {}
for t, r, b, i in ev:
    first.setdefault(b, r)
    last[b] = r
    if r != 3 and not global_rb and i <= top.get((r, b), 0):
        print("  rank %d block %d went back from %d to %d" % (r, b, top[(r, b)], i))
        sys.exit(1)
    top[(r, b)] = i
bad = {b: (first[b], last[b]) for b in first if first[b] != last[b]}
if bad or len(first) != 8 * n:
    print("  blocks %d; not back on their first host (first, last): %s" % (len(first), bad))
sys.exit(bool(bad) or len(first) != 8 * n)
PY
}
home_checks() {   # home_checks NAME REF
    want=$2
    check "$1: exit 0 (got $RC), checksum $(sum_of) equals the reference $want" eval \
        '[ "$RC" = 0 ] && [ "$(sum_of)" = "$want" ]'
    check "$1: a partial round, no rollback anywhere" eval \
        'logged "\"ev\":\"partial_restore\"" && ! logged "\"ev\":\"rollback\""'
    check "$1: rank 3's new incarnation was taken in hosting nothing" \
        grep -qs '"ev":"rejoin_empty"' "$DIR/ev.3.jsonl"
    check "$1: all 8 of rank 3's tasks came home ($(moved_home))" [ "$(moved_home)" = 8 ]
    check "$1: placement afterwards equals before; no block went back" placement
    check "$1: no frame reached a task's old host" eval '! grep -qs "malformed application frame" "$DIR/err"'
}

run causal mlog-causal $ARGS --phx-recovery-helpers=2
home_checks "mlog-causal, recovery-helpers=2" "$ref"
check "mlog-causal: the two helpers shipped 4 tasks each" eval \
    '[ "$(grep -hs "\"ev\":\"migrate_out\"" "$DIR"/ev.*.jsonl | grep -c "\"tasks\":4,")" = 2 ]'

run pess mlog-pessimistic $ARGS_P
home_checks "mlog-pessimistic, every live rank helping" "$ref_p"

run fast mlog-fast $ARGS -T --phx-recovery-helpers=4
home_checks "mlog-fast (jacobi -T), recovery-helpers=4" "$ref"

# Spawns: apps/order -S 4 passes tokens through children. Replayed spawns
# reuse recorded ids (creator rank 3); the newcomer's own spawns after its
# tasks came home carry a fresh creator, so no id is made twice.
APP=order HOLD=120 run order mlog-causal -k 3000 -S 4 -V 4 -c 50
kids=$((N * 4 * 2 * (2999 / 4)))
check "order -S 4: exit 0 (got $RC), consistent, kids=$kids" eval \
    '[ "$RC" = 0 ] && grep -q "kids=$kids consistent=yes" "$DIR/out"'
check "order -S 4: rank 3's tasks came home to a fresh creator" eval \
    'grep -qs "\"ev\":\"rejoin_empty\",\"epoch\":[0-9]*,\"creator\":65532" "$DIR/ev.3.jsonl" && logged "\"ev\":\"home\""'

# Two losses one after the other, the second once the first one's respawn
# is connected but not yet taken in (its replay's release waits on RGATE,
# PHX_MLOG_TEST_HOLD_RELEASE, so no checkpoint commits meanwhile): the
# second loss rolls back globally (a void replay: RGATE stays shut) and
# takes both respawns in at once. Respawn 1 knew rank 5's old process, which no
# detector of its own saw die; without phx_net_take_inc it refused rank 5's
# respawn for good and the job hung.
DIR=$TMP/two; mkdir -p "$DIR"
GATE=$(gate_new two); RGATE=$(gate_new two-release)
PHX_MLOG_TEST_HOLD_RELEASE=$RGATE timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" --pidfile "$DIR/pids" "$BIN/jacobi" --phx-ft=1 \
    --phx-recovery=mlog-causal --phx-restart-on=respawn --phx-eventlog="$DIR/ev.%r.jsonl" $ARGS \
    -H $KILL_AT -g "$GATE" >"$DIR/out" 2>"$DIR/err" &
JOBPID=$!
back() {   # back RANK INC: every other rank saw incarnation INC of RANK connect
    [ "$(grep -ls "\"ev\":\"peer_back\",\"peer\":$1,\"inc\":$2}" "$DIR"/ev.*.jsonl | wc -l)" -ge 7 ]
}
wait_for "$JOB_TIMEOUT" logged '"ev":"jacobi_hold"' && wait_for "$JOB_TIMEOUT" settled 2 || fail "two: never held"
kill -9 "$(awk '$1 == 1 { print $2 }' "$DIR/pids")"
wait_for "$JOB_TIMEOUT" eval 'back 1 1 || ! kill -0 "$JOBPID" 2>/dev/null' || fail "two: rank 1's respawn never connected"
kill -9 "$(awk '$1 == 5 { print $2 }' "$DIR/pids")"
wait_for "$JOB_TIMEOUT" eval 'logged "\"ev\":\"rejoin\",\"rank\":5," || ! kill -0 "$JOBPID" 2>/dev/null'
gate_open "$GATE"
wait "$JOBPID"; RC=$?
[ "$RC" = 0 ] || grep -v "status:" "$DIR/err" | tail -8 | sed 's/^/  err: /'
check "two losses, the second before the first's respawn was taken in: exit 0 (got $RC), checksum equals the reference" \
    eval '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "two losses: one global round took both respawns in" eval \
    'logged "\"ev\":\"rollback\"" && grep -qs "\"ev\":\"rejoin\",\"rank\":1,\"inc\":1" "$DIR/ev.0.jsonl" &&
     grep -qs "\"ev\":\"rejoin\",\"rank\":5,\"inc\":1" "$DIR/ev.0.jsonl"'

# A helper dies after shipping its part, before rebuilding what stays: the
# moving checkpoint never commits, so the round rolls back globally (its
# respawn taken in by that round) and still ends with the right checksum.
export PHX_CKPT_DIE=4:0:shipped
run shipped mlog-causal $ARGS --phx-recovery-helpers=2
check "a helper killed after shipping: exit 0 (got $RC), checksum equals the reference" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "a helper killed after shipping: the failure rolled back globally" logged '"ev":"rollback"'
check "a helper killed after shipping: rank 4 was taken back in" logged '"ev":"rejoin","rank":4,'
# The newcomer dies once its tasks arrived: its respawn is taken in by the
# global round, empty (the epoch's table has its slices on the helpers),
# and they come home at a checkpoint after.
export PHX_CKPT_DIE=3:1:moved
run moved mlog-causal $ARGS --phx-recovery-helpers=2
unset PHX_CKPT_DIE
check "the newcomer killed with its tasks home: exit 0 (got $RC), checksum equals the reference" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "the newcomer killed with its tasks home: a global rollback, incarnation 2 taken in" eval \
    'logged "\"ev\":\"rollback\"" && logged "\"ev\":\"rejoin\",\"rank\":3,\"inc\":2,"'
check "the newcomer killed with its tasks home: incarnation 2 taken in empty, the tasks came home again" \
    eval '[ "$(grep -c "\"ev\":\"rejoin_empty\"" "$DIR/ev.3.jsonl")" = 2 ] && placement rollback'

finish
