#!/bin/bash
# recovery=cr with the lost rank coming back instead of its tasks spreading
# over the survivors, on apps/jacobi, 8 loopback nodes x 2 workers:
# restart-on=respawn (phx run restarts the killed process as incarnation 1,
# which rejoins) and restart-on=spare (phx run --spares K; a spare stands
# in). One SIGKILL mid-run (after the main task logged an iteration: in the
# work by construction); the checksum must be bit-identical to the
# sequential reference, which equals the fault-free distributed run (it_ckpt
# checks that). A rank that does not come back ends the job with exit 78.
# tdk (a job that ends by quiescence) gets one kill with each as well.
# PHX_CKPT_DIE=RANK:INC:rejoin makes incarnation INC of RANK die at start.
# Usage: test_ckpt_rejoin.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
N=8
HB=$(hb_ms)
export PHX_HB_TIMEOUT=$HB PHX_WORKERS=2
unset PHX_HB_PERIOD PHX_TD PHX_CKPT_DIE PHX_RESTART_ON PHX_SPARES PHX_RESPAWN_MAX PHX_INCARNATION
ARGS="-N 256 -i 3000 -c 100"
KILL_AT=300
JOB_TIMEOUT=$((40 + 10 * HB / 1000))

ref=$("$BIN/jacobi" --seq $ARGS -P $N | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
[ -n "$ref" ] || { echo "FAIL - jacobi --seq printed no checksum"; exit 1; }
echo "reference checksum $ref"

# start NAME [phx run options] -- [runtime flags]: background job (JOBPID, DIR).
start() {
    DIR=$TMP/$1; shift
    mkdir -p "$DIR"
    local opts=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" "${opts[@]}" --pidfile "$DIR/pids" "$BIN/jacobi" \
        --phx-ft=1 --phx-recovery=cr --phx-eventlog="$DIR/ev.%r.jsonl" "$@" $ARGS \
        >"$DIR/out" 2>"$DIR/err" &
    JOBPID=$!
    PIDS="$PIDS $JOBPID"
}
pid_of() { awk -v r="$1" '$1 == r { print $2 }' "$DIR/pids"; }
kill_at() {
    wait_for "$JOB_TIMEOUT" logged "\"ev\":\"jacobi_iter\",\"iter\":$1}" ||
        { fail "$DIR: iteration $1 never logged"; return; }
    wait_for 5 test -s "$DIR/pids"
    kill -9 "$(pid_of "$2")"
}
finish_job() { wait "$JOBPID"; RC=$?; }
sum_of() { sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' "$DIR/out" | tail -1; }
verify() {
    check "$1: exit code 0 (got $RC)" [ "$RC" = 0 ]
    check "$1: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
    check "$1: recovered" grep -qs '"ev":"recovery_done"' "$DIR"/ev.*.jsonl
}

# ---- restart-on=respawn: rank 3 comes back as incarnation 1 -------------------
start respawn -- --phx-restart-on=respawn
kill_at $KILL_AT 3
finish_job
verify "respawn (rank 3)"
check "respawn: phx run restarted rank 3 as incarnation 1" grep -qs "rank 3 respawned as incarnation 1" "$DIR/err"
check "respawn: the survivors took incarnation 1 in" grep -qs '"ev":"rejoin","rank":3,"inc":1,' "$DIR/ev.0.jsonl"
check "respawn: rank 3 restored its own tasks from its buddy's copy" \
    grep -qs '"tasks":[1-9][0-9]*,"source":"buddy","of":3,"host":3,' "$DIR/ev.3.jsonl"
hosts=$(grep -ls '"tasks":[1-9][0-9]*,"source":"buddy","of":3,' "$DIR"/ev.*.jsonl | wc -l)
check "respawn: nobody else took rank 3's tasks ($hosts hosts)" [ "$hosts" = 1 ]
check "respawn: rank 3 re-entered the heartbeat ring (view 1)" grep -qs '"ev":"view","view":1,"dead":0}' "$DIR/ev.3.jsonl"
check "respawn: rank 3 took part in a checkpoint after rejoining" \
    sh -c "sed -n '/\"ev\":\"rejoin\"/,\$p' '$DIR/ev.3.jsonl' | grep -q '\"ev\":\"ckpt_commit\"'"

# ---- the old incarnation wakes up after its death: it stays dead --------------
# SIGSTOP until the survivors declared rank 3 dead, then SIGCONT: the old
# process is refused, fences itself (75), and phx run respawns it.
start stopped -- --phx-restart-on=respawn
wait_for "$JOB_TIMEOUT" logged "\"ev\":\"jacobi_iter\",\"iter\":$KILL_AT}" || fail "stopped: iteration never logged"
wait_for 5 test -s "$DIR/pids"
p3=$(pid_of 3)
kill -STOP "$p3"
wait_for "$JOB_TIMEOUT" grep -qs '"ev":"notice","dead":3' "$DIR/ev.0.jsonl" || fail "stopped: rank 3 never declared dead"
kill -CONT "$p3"
finish_job
verify "old incarnation woken up (rank 3)"
check "stopped: the old incarnation was refused and fenced" grep -qs "rank 3 fenced" "$DIR/err"
check "stopped: incarnation 1 was taken in" grep -qs '"ev":"rejoin","rank":3,"inc":1,' "$DIR/ev.0.jsonl"

# ---- the coordinator and main task's node comes back ----------------------------
start respawn0 -- --phx-restart-on=respawn
kill_at $KILL_AT 0
finish_job
verify "respawn (rank 0, coordinator)"
check "respawn0: rank 0 restored its own tasks" grep -qs '"source":"buddy","of":0,"host":0,' "$DIR/ev.0.jsonl"

# ---- the first respawn dies before it connects; the second rejoins ------------
# PHX_CKPT_DIE=3:1:rejoin: incarnation 1 of rank 3 kills itself at start.
export PHX_CKPT_DIE=3:1:rejoin
start redie -- --phx-restart-on=respawn
unset PHX_CKPT_DIE
kill_at $KILL_AT 3
finish_job
verify "respawn dies once (rank 3)"
check "redie: incarnation 2 was taken in" grep -qs '"ev":"rejoin","rank":3,"inc":2,' "$DIR/ev.0.jsonl"

# ---- a respawn that cannot rejoin: exit 78 and a message, no checksum ---------
# Its only respawn dies at start (PHX_RESPAWN_MAX=1); the survivors wait
# startup-timeout for it.
N=4
export PHX_RESPAWN_MAX=1 PHX_CKPT_DIE=2:1:rejoin
start failrespawn -- --phx-restart-on=respawn --phx-startup-timeout=5000
unset PHX_RESPAWN_MAX PHX_CKPT_DIE
kill_at $KILL_AT 2
finish_job
check "failed respawn: exit code 78 (got $RC)" [ "$RC" = 78 ]
check "failed respawn: the launcher says it gave up" grep -qs "rank 2: not respawned again" "$DIR/err"
check "failed respawn: the message names rank 2" grep -qs "rank 2 did not come back within 5000 ms" "$DIR/err"
check "failed respawn: no checksum printed" [ -z "$(sum_of)" ]
N=8

# ---- restart-on=spare: rank 8 idles, then stands in for rank 3 ---------------
start spare --spares 1 -- --phx-restart-on=spare
kill_at $KILL_AT 3
finish_job
verify "spare"
check "spare: the spare (rank 8) restored rank 3's tasks from its buddy's copy" \
    grep -qs '"source":"buddy","of":3,"host":8,' "$DIR/ev.8.jsonl"
hosts=$(grep -ls '"tasks":[1-9][0-9]*,"source":"buddy","of":3,' "$DIR"/ev.*.jsonl | wc -l)
check "spare: nobody else took rank 3's tasks ($hosts hosts)" [ "$hosts" = 1 ]
check "spare: the spare held no tasks before" grep -qs '"ev":"restore","tasks":0,"source":"local"' "$DIR/ev.8.jsonl"

# ---- tdk (ends by quiescence at a cut) with a respawn and with a spare ---------
# project behind its --hold gate: rank 3 logged tdk_hold and committed epoch
# 2 (held results in it) before the kill; the gate opens after the recovery.
# The last answer line must equal the fault-free run's.
tdk_answer() { sed -n 's/.*tdk project: nodes=[0-9]* \(.*\) relerr=[^ ]* \(.*\) OK last_task.*/\1 \2/p' "$DIR/out" | tail -1; }
DIR=$TMP/tdk-ref; mkdir -p "$DIR"
timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" "$BIN/tdk" project 1e-9 --phx-ft=1 --phx-recovery=cr \
    >"$DIR/out" 2>"$DIR/err"
tdk_ref=$(tdk_answer)
check "tdk fault-free under cr: an OK answer (${tdk_ref:-none})" [ -n "$tdk_ref" ]
for how in respawn spare; do
    DIR=$TMP/tdk-$how; mkdir -p "$DIR"
    sp=(); [ "$how" = spare ] && sp=(--spares 1)
    timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" "${sp[@]}" --pidfile "$DIR/pids" "$BIN/tdk" --hold "$DIR/go" \
        project 1e-9 --phx-ft=1 --phx-recovery=cr --phx-restart-on=$how --phx-ckpt-interval=1 \
        --phx-eventlog="$DIR/ev.%r.jsonl" >"$DIR/out" 2>"$DIR/err" &
    JOBPID=$!; PIDS="$PIDS $JOBPID"
    wait_for "$JOB_TIMEOUT" grep -qs '"ev":"tdk_hold"' "$DIR/ev.3.jsonl" || fail "tdk $how: rank 3 never held"
    wait_for "$JOB_TIMEOUT" grep -qs '"ev":"ckpt_commit","epoch":2,' "$DIR/ev.3.jsonl" || fail "tdk $how: no epoch 2"
    wait_for 5 test -s "$DIR/pids"
    kill -9 "$(pid_of 3)"
    wait_for "$JOB_TIMEOUT" grep -qs '"ev":"recovery_done"' "$DIR/ev.0.jsonl" || fail "tdk $how: no recovery"
    touch "$DIR/go"
    finish_job
    check "tdk $how (rank 3): exit 0 (got $RC)" [ "$RC" = 0 ]
    check "tdk $how: answer '$(tdk_answer)' equals the fault-free one" [ "$(tdk_answer)" = "$tdk_ref" ]
    host=$([ "$how" = spare ] && echo 8 || echo 3)
    check "tdk $how: rank $host restored rank 3's tasks" \
        grep -qs "\"tasks\":[1-9][0-9]*,\"source\":\"buddy\",\"of\":3,\"host\":$host," "$DIR/ev.$host.jsonl"
    check "tdk $how: ended by quiescence at a cut" grep -qs '"ev":"td_declare","td":"cut"' "$DIR"/ev.*.jsonl
done

# ---- restart-on=spare without spares: refused at startup ----------------------
DIR=$TMP/nospare; mkdir -p "$DIR"
timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n 2 "$BIN/jacobi" --phx-ft=1 --phx-recovery=cr --phx-restart-on=spare \
    -N 64 -i 10 >"$DIR/out" 2>"$DIR/err"
RC=$?
check "spare without --spares: refused (rc $RC)" [ "$RC" != 0 ]
check "spare without --spares: says why" grep -qs "needs spare nodes" "$DIR/err"

# ---- whoever restarts the process: the incarnation counter file ------------
# A container restart policy restarts a node with the same environment;
# PHX_INCARNATION_FILE (%r: the rank) gives each start the next incarnation.
DIR=$TMP/incfile; mkdir -p "$DIR"
for i in 1 2; do
    PHX_INCARNATION_FILE="$DIR/inc.%r" "$BIN/jacobi" -N 32 -i 2 >/dev/null 2>&1
done
check "incarnation file: two starts of rank 0 leave 2 in it" [ "$(cat "$DIR/inc.0" 2>/dev/null)" = 2 ]
# The same restart with the counter file only (phx run then passes no
# PHX_INCARNATION, as a container runtime would not).
export PHX_INCARNATION_FILE="$TMP/incrun/inc.%r"
start incrun -- --phx-restart-on=respawn
kill_at $KILL_AT 5
finish_job
unset PHX_INCARNATION_FILE
verify "respawn counted by the incarnation file (rank 5)"
check "incrun: rank 5 rejoined as incarnation 1" grep -qs '"ev":"rejoin","rank":5,"inc":1,' "$DIR/ev.0.jsonl"

finish
