#!/bin/bash
# Whole jobs through the launcher: the example apps on 1-8 loopback nodes,
# every termination detector, exit codes, and node loss reporting.
# Usage: test_jobs.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
unset PHX_TD PHX_FT

out() { "$PHX" run "$@" >"$TMP/out" 2>"$TMP/err"; echo $? >"$TMP/rc"; }
rc_is() { [ "$(cat "$TMP/rc")" = "$1" ]; }

out -n 4 "$BIN/ring" 300
check "ring on 4 nodes" rc_is 0
check "ring result" grep -q "4 nodes x 300 laps = 1200 hops.*OK" "$TMP/out"

out -n 1 "$BIN/ring" 50
check "ring on 1 node" rc_is 0

# Hostfile with two loopback addresses, both formats.
printf '127.0.0.1 slots=2\n127.0.0.2:2  # MPICH style\n' >"$TMP/hosts"
out -f "$TMP/hosts" "$BIN/ring" 100
check "ring on a 4-slot hostfile over 127.0.0.1/.2" rc_is 0

# Dynamic task creation, job ended by each termination detector.
for td in 4c edod hcda cda indep rellazy releager; do
    PHX_TD=$td out -n 8 "$BIN/fib" 14
    check "fib on 8 nodes ends by quiescence with td=$td" rc_is 0
    check "fib result with td=$td" grep -q "fib(14) = 377 on 8 nodes.*OK" "$TMP/out"
done

# Backpressure both ways: tiny send and receive budgets still complete.
PHX_TD=none PHX_SEND_BUFFER=64k PHX_RECV_BUFFER=256k out -n 2 "$BIN/pingpong" rate 300000
check "stream completes under 64 KiB send / 256 KiB receive budgets" rc_is 0
PHX_TD=none PHX_RECV_BUFFER=2m out -n 2 "$BIN/pingpong" bw 50
check "1 MiB messages complete with a 2 MiB receive budget" rc_is 0

# The job's exit code is every node's exit code.
out -n 2 "$BIN/pingpong" nosuchmode
check "job exit code propagates (2)" rc_is 2

# Node loss without fault tolerance: reported by the launcher, survivors end
# the job with a clear error instead of hanging.
"$PHX" run -n 4 --pidfile "$TMP/pids" "$BIN/ring" 100000000 >"$TMP/out" 2>"$TMP/err" &
L=$!; PIDS="$PIDS $L"
wait_for 20 test -s "$TMP/pids" || fail "pidfile appears"
sleep 0.5
victim=$(awk '$1 == 2 { print $2 }' "$TMP/pids")
kill -9 "$victim"
wait "$L"; rc=$?
check "launcher reports the killed rank" grep -q "rank 2 (pid $victim.*killed by signal 9" "$TMP/err"
check "survivors end the job with code 70 (rc $rc)" [ "$rc" = 70 ]
check "survivors name the lost rank" grep -q "lost rank 2" "$TMP/err"
finish
