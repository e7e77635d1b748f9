#!/bin/bash
# Checkpoint/restart (recovery=cr) on 8 loopback nodes, 2 workers each:
# apps/jacobi runs a fixed number of iterations with a checkpoint every 100;
# nodes are killed inside the run and the final checksum must be
# bit-identical to the sequential reference (jacobi --seq), which equals the
# fault-free distributed run (checked first).
# Kills land by construction: the test waits for a jacobi_iter line in the
# JSON event log before SIGKILL, or the node kills itself at a protocol
# point (PHX_CKPT_DIE=RANK:EPOCH:stored|rollback).
# Then fib (by phx_exit and by quiescence) and tdk (by quiescence: td=cut,
# decided on a checkpoint's cut), each killed inside the work and compared
# with the fault-free answer.
# Usage: test_ckpt.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
N=8
HB=${PHX_HB_TIMEOUT:-1000}
export PHX_HB_TIMEOUT=$HB PHX_WORKERS=2
unset PHX_HB_PERIOD PHX_TD PHX_CKPT_DIE
# Long enough that a kill at iteration 300 is mid-run; a few heartbeat
# timeouts of detection plus startup slack bound one job.
ARGS="-N 256 -i 3000 -c 100"
KILL_AT=300
JOB_TIMEOUT=$((40 + 10 * HB / 1000))

ref=$("$BIN/jacobi" --seq $ARGS -P $N | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
[ -n "$ref" ] || { echo "FAIL - jacobi --seq printed no checksum"; exit 1; }
echo "reference checksum $ref"

# start NAME [ENV...]: launches the job in the background (sets JOBPID, DIR).
start() {
    DIR=$TMP/$1; shift
    mkdir -p "$DIR"
    env "$@" timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" --pidfile "$DIR/pids" "$BIN/jacobi" \
        --phx-ft=1 --phx-recovery=cr --phx-eventlog="$DIR/ev.%r.jsonl" $ARGS \
        >"$DIR/out" 2>"$DIR/err" &
    JOBPID=$!
    PIDS="$PIDS $JOBPID"
}
# logged PATTERN: some node's event log has it (globbed at each call).
pid_of() { awk -v r="$1" '$1 == r { print $2 }' "$DIR/pids"; }
# kill_at ITER RANK...: SIGKILL those ranks once the main task logged ITER.
kill_at() {
    it=$1; shift
    wait_for "$JOB_TIMEOUT" logged "\"ev\":\"jacobi_iter\",\"iter\":$it}" ||
        { fail "$DIR: iteration $it never logged"; return; }
    wait_for 5 test -s "$DIR/pids"
    p=""
    for r in "$@"; do p="$p $(pid_of "$r")"; done
    kill -9 $p
}
finish_job() { wait "$JOBPID"; RC=$?; }
sum_of() { sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' "$DIR/out" | tail -1; }

# verify NAME: exit 0, the reference checksum, a rollback really happened.
verify() {
    check "$1: exit code 0 (got $RC)" [ "$RC" = 0 ]
    check "$1: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
    check "$1: survivors rolled back and recovered" grep -qs '"ev":"recovery_done"' "$DIR"/ev.*.jsonl
}

# ---- fault-free, with checkpoints ---------------------------------------------
start clean
finish_job
check "clean: exit 0 (got $RC)" [ "$RC" = 0 ]
check "clean: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
check "clean: checkpoints committed" grep -qs '"ev":"ckpt_commit","epoch":5,' "$DIR/ev.0.jsonl"

# ---- one SIGKILL mid-run, restart-on=survivors ------------------------------
# max-frame well under a node's checkpoint (about 70 KB here): the buddy
# copies and the shipped copies travel in many chunks.
start one PHX_MAX_FRAME=16384
kill_at $KILL_AT 3
finish_job
verify "one kill (rank 3)"
big=$(sed -n 's/.*"ev":"ckpt_stored","epoch":3,"bytes":\([0-9]*\).*/\1/p' "$DIR/ev.3.jsonl")
check "one kill: a checkpoint (${big:-no} bytes) larger than max-frame" [ "${big:-0}" -gt 65536 ]
check "one kill: rank 3's buddy restored its tasks" grep -qs '"source":"buddy","of":3,' "$DIR"/ev.*.jsonl
hosts=$(grep -ls '"source":"buddy","of":3,' "$DIR"/ev.*.jsonl | wc -l)
check "one kill: rank 3's tasks spread over several survivors ($hosts hosts)" [ "$hosts" -ge 3 ]

# ---- the coordinator and main task's node --------------------------------------
start coord
kill_at $KILL_AT 0
finish_job
verify "kill rank 0 (coordinator, main task)"

# ---- between the local store and the commit of epoch 4 --------------------------
start stored PHX_CKPT_DIE=5:4:stored
finish_job
verify "kill between store and commit"
check "stored: rolled back to epoch 3, the last committed" grep -qs '"ev":"rollback","epoch":3,' "$DIR"/ev.*.jsonl

# ---- the coordinator dies while committing epoch 4 --------------------------------
# Its COMMIT reaches every member but the highest rank (the hook), which
# reports epoch 3 while the others report 4. The decision is 4; the member
# that missed the COMMIT must count 4 committed from its rollback on, or
# the next checkpoint finds no free slot there (its copies are 3, which it
# thinks committed, and 4) and the job ends on a needless error.
start commit PHX_CKPT_DIE=0:4:commit
finish_job
verify "coordinator dies mid-COMMIT"
check "commit: rolled back to epoch 4, which only some members heard committed" \
    grep -qs '"ev":"rollback","epoch":4,' "$DIR"/ev.*.jsonl
check "commit: epoch 5 committed after the recovery" grep -qs '"ev":"ckpt_commit","epoch":5,' "$DIR"/ev.1.jsonl

# ---- a second failure during the recovery from the first ------------------------
start during PHX_CKPT_DIE=6:0:rollback
kill_at $KILL_AT 2
finish_job
verify "kill during recovery (2, then 6)"
check "during: a second round covered both" grep -qs '"ev":"recovery_done","epoch":[0-9]*,"round":2' "$DIR"/ev.*.jsonl

# ---- two non-buddy nodes at once ------------------------------------------------
start two
kill_at $KILL_AT 1 5
finish_job
verify "two non-buddy kills (1 and 5)"

# ---- a node and its buddy, no disk checkpoint -----------------------------------
start pair
kill_at $KILL_AT 3 4
finish_job
check "node+buddy: exit code 78 (got $RC)" [ "$RC" = 78 ]
check "node+buddy: message names both ranks" grep -qs "rank 3 and its buddy rank 4 both died" "$DIR/err"
check "node+buddy: no checksum printed" [ -z "$(sum_of)" ]

# ---- disk: a node and its buddy together, recovered from ckpt-dir ---------------
CK=$TMP/disk-ck
start pairdisk PHX_CKPT_DIR="$CK"
wait_for "$JOB_TIMEOUT" logged '"ev":"ckpt_disk","epoch":3}' || fail "pairdisk: no manifest of epoch 3"
wait_for 5 test -s "$DIR/pids"
kill -9 "$(pid_of 3)" "$(pid_of 4)"
finish_job
verify "node+buddy with a disk checkpoint"
check "pairdisk: restored from disk" logged '"source":"disk"'

# ---- disk: the whole job killed, restarted on 8 and on 6 nodes -------------------
CK=$TMP/whole-ck
start whole PHX_CKPT_DIR="$CK"
wait_for "$JOB_TIMEOUT" logged '"ev":"ckpt_disk","epoch":4}' || fail "whole: no manifest of epoch 4"
wait_for 5 test -s "$DIR/pids"
kill -9 $(awk '{ print $2 }' "$DIR/pids")
finish_job
check "whole job killed (rc $RC is not 0)" [ "$RC" != 0 ]
for v in r8 r6 trunc corrupt foreign; do cp -r "$CK" "$TMP/ck-$v"; done
# restart NAME NODES DIR [PROGRAM ARGS]: phx run --restart (sets RC, DIR).
restart() {
    DIR=$TMP/$1; mkdir -p "$DIR"
    timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$2" --restart "$3" "${4:-$BIN/jacobi}" --phx-ft=1 \
        --phx-recovery=cr --phx-eventlog="$DIR/ev.%r.jsonl" >"$DIR/out" 2>"$DIR/err"
    RC=$?
}
last=$(ls "$CK" | sed -n 's/^manifest-e\([0-9]*\)\.bin$/\1/p' | sort -n | tail -1)
restart restart8 8 "$TMP/ck-r8"
check "restart on 8: exit 0 (got $RC)" [ "$RC" = 0 ]
check "restart on 8: checksum $(sum_of) equals the reference" [ "$(sum_of)" = "$ref" ]
check "restart on 8: from the last epoch ($last)" logged "\"ev\":\"rollback\",\"epoch\":$last,"
restart restart6 6 "$TMP/ck-r6"
check "restart on 6: exit 0 (got $RC)" [ "$RC" = 0 ]
check "restart on 6: checksum $(sum_of) equals the reference" [ "$(sum_of)" = "$ref" ]
f=$TMP/ck-trunc/ckpt-e$last-r2.bin
truncate -s 100 "$f"
restart trunc 8 "$TMP/ck-trunc"
check "truncated file: error names it" grep -q "ckpt-e$last-r2.bin: truncated" "$DIR/err"
check "truncated file: fell back to epoch $((last - 1))" logged "\"ev\":\"rollback\",\"epoch\":$((last - 1)),"
check "truncated file: checksum $(sum_of) equals the reference" [ "$(sum_of)" = "$ref" ]
f=$TMP/ck-corrupt/ckpt-e$last-r5.bin
printf '\377' | dd of="$f" bs=1 seek=200 conv=notrunc 2>/dev/null
restart corrupt 8 "$TMP/ck-corrupt"
check "corrupt file: error names it" grep -q "ckpt-e$last-r5.bin: corrupt" "$DIR/err"
check "corrupt file: checksum $(sum_of) equals the reference" [ "$(sum_of)" = "$ref" ]
restart foreign 8 "$TMP/ck-foreign" "$BIN/fib"
check "another program's checkpoint: refused (rc $RC)" [ "$RC" != 0 ]
check "another program's checkpoint: says foreign" grep -q "foreign" "$DIR/err"

# ---- fib (dynamic tasks, thousands of them in flight) under cr ---------------
# Automatic checkpoints every second (epoch 1 is taken at job start); rank 3
# kills itself while storing epoch 2, about a second into a run of several
# (longer under load, while the timer is not), so the job cannot end without
# recovering: rollback to epoch 1. fib(30): fib(28) came to end within the
# first second on 8 nodes once a node's tasks spread over all its workers. fib ends by phx_exit (--exit).
# Its length is CPU work, about 3 s on a quiet 2-core host and 50 s at a
# load of 20 (the recovered run, rank 3's share on one survivor, takes
# twice the fault-free one): the bound, there to catch a hang, is three
# times a jacobi job's.
DIR=$TMP/fib
mkdir -p "$DIR"
PHX_CKPT_DIE=3:2:stored timeout -k 5 $((3 * JOB_TIMEOUT)) "$PHX" run -n "$N" "$BIN/fib" 30 --exit \
    --phx-ft=1 --phx-recovery=cr --phx-ckpt-interval=1 --phx-eventlog="$DIR/ev.%r.jsonl" \
    >"$DIR/out" 2>"$DIR/err"
RC=$?
check "fib under cr, rank 3 killed: exit 0 (got $RC)" [ "$RC" = 0 ]
check "fib under cr: fault-free answer" grep -q "fib(30) = 832040 .* OK" "$DIR/out"
check "fib under cr: recovered" logged '"ev":"recovery_done"'
# The same without --exit: fib ends by quiescence (td=cut), which is only
# ever declared at a committed cut; epoch 2 never commits with rank 3, so
# the job cannot end without recovering. A line printed before the kill is
# printed again after the rollback: the last one is the answer.
DIR=$TMP/fib-q
mkdir -p "$DIR"
PHX_CKPT_DIE=3:2:stored timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" "$BIN/fib" 24 \
    --phx-ft=1 --phx-recovery=cr --phx-eventlog="$DIR/ev.%r.jsonl" >"$DIR/out" 2>"$DIR/err"
RC=$?
check "fib by quiescence under cr, rank 3 killed at epoch 2: exit 0 (got $RC)" [ "$RC" = 0 ]
check "fib by quiescence: fault-free answer" sh -c "grep 'fib(24)' '$DIR/out' | tail -1 | grep -q 'fib(24) = 46368 .* OK'"
check "fib by quiescence: recovered, then ended at a cut" \
    sh -c "grep -qs '\"ev\":\"recovery_done\"' '$DIR'/ev.*.jsonl && grep -qs '\"td\":\"cut\"' '$DIR'/ev.*.jsonl"

# ---- tdk (ends by quiescence) under cr ------------------------------------------
# No task calls phx_exit: the job ends when a checkpoint's cut finds no
# message queued anywhere (td=cut, ft/ckpt/quiet.h). The answer line
# (tree size, depth, integral bit for bit) must equal the fault-free run's.
TDK_ARGS="project 1e-9"
# tdk_run NAME [ENV...] -- [tdk args]: background job (JOBPID, DIR).
tdk_run() {
    DIR=$TMP/$1; shift
    mkdir -p "$DIR"
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    env "${envs[@]}" timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" --pidfile "$DIR/pids" "$BIN/tdk" "$@" \
        --phx-ft=1 --phx-recovery=cr --phx-eventlog="$DIR/ev.%r.jsonl" >"$DIR/out" 2>"$DIR/err" &
    JOBPID=$!
    PIDS="$PIDS $JOBPID"
}
# The last result line: one printed before a kill is printed again after
# the rollback re-runs its task (stdout is not rolled back), equal.
answer() { sed -n 's/.*tdk \([a-z]*\): nodes=[0-9]* \(.*\) OK last_task.*/\1 \2/p' "$DIR/out" | sed 's/ relerr=[^ ]*//' | tail -1; }
tdk_run tdk-clean -- $TDK_ARGS
finish_job
tdk_ref=$(answer)
check "tdk clean: exit 0 (got $RC)" [ "$RC" = 0 ]
check "tdk clean: the answer (${tdk_ref:-none}) is the sequential reference's (OK)" [ -n "$tdk_ref" ]
check "tdk clean: ended by quiescence at a cut" logged '"ev":"td_declare","td":"cut"'
# --hold GATE keeps every leaf's result at its node's gate task until GATE
# exists: the work cannot finish before the kill. The victim logs tdk_hold
# (it holds a pending cell) and commits epoch 2 (a checkpoint with held
# results in it, ckpt-interval 1 s) before it is killed; then the gate opens.
tdk_kill() {   # NAME VICTIM [phx flags]
    local name=$1 v=$2; shift 2
    tdk_run "$name" -- --hold "$TMP/$name/go" $TDK_ARGS --phx-ckpt-interval=1 "$@"
    wait_for "$JOB_TIMEOUT" grep -qs '"ev":"tdk_hold"' "$DIR/ev.$v.jsonl" || fail "$name: rank $v never held"
    wait_for "$JOB_TIMEOUT" grep -qs '"ev":"ckpt_commit","epoch":2,' "$DIR/ev.$v.jsonl" ||
        fail "$name: epoch 2 never committed"
    wait_for 5 test -s "$DIR/pids"
    kill -9 "$(pid_of "$v")"
    wait_for "$JOB_TIMEOUT" logged '"ev":"recovery_done"' || fail "$name: no recovery"
    touch "$DIR/go"
    finish_job
    check "$name: exit 0 (got $RC)" [ "$RC" = 0 ]
    check "$name: answer '$(answer)' equals the fault-free one" [ "$(answer)" = "$tdk_ref" ]
    check "$name: rolled back to a checkpoint taken while holding (epoch >= 2)" \
        grep -qs '"ev":"rollback","epoch":[2-9]' "$DIR"/ev.*.jsonl
    check "$name: rank $v's state came from its buddy's copy" grep -qs "\"source\":\"buddy\",\"of\":$v," "$DIR"/ev.*.jsonl
    check "$name: ended by quiescence at a cut" logged '"ev":"td_declare","td":"cut"'
}
tdk_kill tdk-kill3 3
tdk_kill tdk-kill0 0   # the main task moves: its reference is recomputed there
# walk: rank 3 dies storing epoch 2. The job can end only at a committed cut,
# and epoch 2 never commits with it: the job cannot end without recovering.
tdk_run tdk-walk-ref -- walk 20000 0.1 7
finish_job
walk_ref=$(answer)
check "tdk walk clean: exit 0 (got $RC)" [ "$RC" = 0 ]
check "tdk walk clean: answer ${walk_ref:-none} (OK)" [ -n "$walk_ref" ]
tdk_run tdk-walk PHX_CKPT_DIE=3:2:stored -- walk 20000 0.1 7
finish_job
check "tdk walk, rank 3 killed at epoch 2: exit 0 (got $RC)" [ "$RC" = 0 ]
check "tdk walk: answer '$(answer)' equals the fault-free one" [ "$(answer)" = "$walk_ref" ]
check "tdk walk: recovered" logged '"ev":"recovery_done"'
check "tdk walk: no wrong line" [ -z "$(grep -v ' OK ' "$DIR/out" | grep 'tdk walk')" ]
# A detector whose counters cr cannot roll back is refused.
DIR=$TMP/tdk-4c; mkdir -p "$DIR"
timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n 2 "$BIN/tdk" ring 10 --phx-ft=1 --phx-recovery=cr --phx-td=4c \
    >"$DIR/out" 2>"$DIR/err"
RC=$?
check "td=4c under cr: refused (rc $RC)" [ "$RC" != 0 ]
check "td=4c under cr: says why" grep -qs "td=4c is not supported" "$DIR/err"

finish
