#!/bin/bash
# recovery=cr with a stand-in for the lost rank instead of spreading its
# tasks over the survivors: restart-on=spare (phx run --spares K) on
# apps/jacobi, 8 loopback nodes x 2 workers. One SIGKILL mid-run (after the
# main task logged an iteration: in the work by construction); the checksum
# must be bit-identical to the sequential reference, which equals the
# fault-free distributed run (it_ckpt checks that).
# Usage: test_ckpt_rejoin.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
N=8
HB=$(hb_ms)
export PHX_HB_TIMEOUT=$HB PHX_WORKERS=2
unset PHX_HB_PERIOD PHX_TD PHX_CKPT_DIE PHX_RESTART_ON PHX_SPARES
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
logged() { grep -qs "$1" "$DIR"/ev.*.jsonl; }
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

# ---- restart-on=spare without spares: refused at startup ----------------------
DIR=$TMP/nospare; mkdir -p "$DIR"
timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n 2 "$BIN/jacobi" --phx-ft=1 --phx-recovery=cr --phx-restart-on=spare \
    -N 64 -i 10 >"$DIR/out" 2>"$DIR/err"
RC=$?
check "spare without --spares: refused (rc $RC)" [ "$RC" != 0 ]
check "spare without --spares: says why" grep -qs "needs spare nodes" "$DIR/err"

finish
