#!/bin/bash
# Message logging: spawns are events too, so a replayed spawn
# makes the same task id. apps/order -S 4: every 4th hop of a token goes
# through a child task that the token's holder spawns (on a node its chain
# picks, its own included); the child mixes its own id into the token and
# hands it back, and the parent folds that into its chain. A restored task
# that spawned children after the checkpoint spawns them again in its
# replay: under another id the child's answer differs (or the recorded
# answer of the old id never comes, when that child died too), so the job
# would hang, print an inconsistency or count children twice.
# The kill lands after such spawns by construction: the checkpoint due
# after tick 120 and the job's end are held on a gate; the test waits until
# every node committed the checkpoint before it and the victim logged a
# spawn (order_spawn) after its last commit, then kills it.
# Usage: test_mlog_spawn.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
N=8
HB=$(hb_ms)
export PHX_HB_TIMEOUT=$HB PHX_WORKERS=2
unset PHX_HB_PERIOD PHX_TD PHX_CKPT_DIE
JOB_TIMEOUT=$((60 + 10 * HB / 1000))
HOPS=400; S=4; V=4
KIDS=$((N * V * 2 * ((HOPS - 1) / S)))   # tokens x floor((hops - 1) / s)
OARGS="-k $HOPS -S $S -V $V -c 50"

start() {   # start NAME MODE [ARGS...]: order in the background (JOBPID, DIR)
    DIR=$TMP/$1; mode=$2; shift 2
    mkdir -p "$DIR"
    timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" --pidfile "$DIR/pids" "$BIN/order" \
        --phx-ft=1 --phx-recovery="$mode" --phx-eventlog="$DIR/ev.%r.jsonl" $OARGS "$@" \
        >"$DIR/out" 2>"$DIR/err" &
    JOBPID=$!
}
finish_job() {
    wait "$JOBPID"; RC=$?
    [ "$RC" = 0 ] || tail -8 "$DIR/err" | sed 's/^/  err: /'
}
every_ge1() { grep -hs "\"ev\":\"$1\"" "$DIR"/ev.*.jsonl | grep -q "\"$2\":[1-9]"; }
result_ok() { grep -q "kids=$KIDS consistent=yes" "$DIR/out"; }
# spawned_after_commit RANK: RANK's tasks spawned a child after its last commit.
spawned_after_commit() {
    awk '/"ev":"ckpt_commit"/ { c = NR; s = 0 } /"ev":"order_spawn"/ { if (c) s = 1 } END { exit !s }' \
        "$DIR/ev.$1.jsonl" 2>/dev/null
}

# alive_and CMD...: CMD succeeds, or the job ended (0 either way: stop waiting).
alive_and() { "$@" || ! kill -0 "$JOBPID" 2>/dev/null; }

start clean mlog-causal
finish_job
check "order -S $S fault-free: exit 0 (got $RC), consistent, kids=$KIDS" eval '[ "$RC" = 0 ] && result_ok'
check "order -S $S fault-free: children spawned on every node" eval \
    '[ "$(grep -ls "\"ev\":\"order_spawn\"" "$DIR"/ev.*.jsonl | wc -l)" = $N ]'

# kill_after_spawns NAME MODE RANK
kill_after_spawns() {
    name=$1; mode=$2; victim=$3
    GATE=$(gate_new "$name")
    start "$name" "$mode" -H 120 -g "$GATE"
    # Each wait gives up as soon as the job is gone (it failed early).
    wait_for "$JOB_TIMEOUT" alive_and logged '"ev":"order_hold"' || fail "$name: the hold never logged"
    wait_for "$JOB_TIMEOUT" alive_and settled "${SETTLE:-3}" || fail "$name: checkpoints never settled"
    wait_for "$JOB_TIMEOUT" alive_and spawned_after_commit "$victim" ||
        fail "$name: rank $victim spawned nothing after its commit"
    wait_for 5 test -s "$DIR/pids"
    p=$(awk -v r="$victim" '$1 == r { print $2 }' "$DIR/pids")
    kill -9 "$p"
    gone "$p" $((JOB_TIMEOUT * 1000)) || fail "$name: rank $victim outlived SIGKILL"
    wait_for "$JOB_TIMEOUT" eval 'grep -qs "\"ev\":\"recovery_done\"" "$DIR/ev.0.jsonl" || ! kill -0 "$JOBPID" 2>/dev/null'
    gate_open "$GATE"
    finish_job
}

# mlog-team (teams of 2): rank 3's team-mate rank 2 rolls back too and
# replays its own record, spawn dets included.
export PHX_MLOG_TEAM_SIZE=2
for mode in ${MODES:-mlog-causal mlog-pessimistic mlog-team}; do
    kill_after_spawns "kill-$mode" "$mode" 3
    check "$mode, kill of rank 3 after its tasks spawned children past the checkpoint: exit 0 (got $RC), consistent, kids=$KIDS" \
        eval '[ "$RC" = 0 ] && result_ok'
    check "$mode, that kill: a partial restore replayed by determinants, no global rollback" eval \
        'logged "\"ev\":\"partial_restore\"" && every_ge1 mlog_replay dets_installed && ! logged "\"ev\":\"rollback\""'
    reused=$(grep -hs '"ev":"mlog_recovery"' "$DIR"/ev.*.jsonl | sed -n 's/.*"spawn_ids_reused":\([0-9]*\).*/\1/p' |
        awk '{s += $1} END {print s + 0}')
    check "$mode, that kill: the replay spawned children again under their recorded ids ($reused)" [ "$reused" -gt 0 ]
done
check "mlog-team, that kill: team-mate rank 2 rolled back and replayed its own determinants" eval \
    'grep -s "\"ev\":\"mlog_team_rollback\"" "$DIR/ev.2.jsonl" | grep -q "\"own_dets\":[1-9]"'
unset PHX_MLOG_TEAM_SIZE
# -c 0 -L 1: no checkpoint but the job start's, so the replay runs from the
# start (main's spawns of rank 3's tasks come back from rank 0's log); START
# passes along a line, so tokens wait in a task's state and START's handler
# folds several at once (several spawns in one handler: k > 0).
OARGS="-k $HOPS -S $S -V $V -c 0 -L 1"; SETTLE=1
kill_after_spawns kill-line mlog-causal 3
check "mlog-causal, -c 0 -L 1 (replay from the start), kill of rank 3: exit 0 (got $RC), consistent, kids=$KIDS" \
    eval '[ "$RC" = 0 ] && result_ok && ! logged "\"ev\":\"rollback\""'
finish
