#!/bin/bash
# Inline mode (workers=0, core/inline.h): the communication thread runs the
# handlers itself. Each job must print the answer the threaded runtime
# prints, every node must say it ran inline, and with fault tolerance on
# (heartbeats between handler turns) nothing may be suspected. pingpong
# rate with a 64 KiB send-buffer holds the handlers back for the send
# budget most of the run: the job ends only if acknowledgements wake them.
# Usage: test_inline.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
HB=${PHX_HB_TIMEOUT:-1000}
unset PHX_TD PHX_FT PHX_EVENTLOG PHX_HB_PERIOD PHX_WORKERS PHX_RECOVERY PHX_BUSY_POLL
export PHX_SECRET=it-secret PHX_HB_TIMEOUT=$HB PHX_LOG=info
JOB_TIMEOUT=$((60 + 20 * HB / 1000))

# job NAME NODES ARGS... : output in $TMP/NAME.{out,err}, exit code in rc
job() {
    name=$1; nodes=$2; shift 2
    timeout -k 5 "$JOB_TIMEOUT" "$BIN/phx" run -n "$nodes" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    rc=$?
    check "$name: exit 0 (rc $rc)" [ "$rc" = 0 ]
    check "$name: all $nodes nodes ran inline" \
        [ "$(grep -c "inline mode: handlers run on the communication thread" "$TMP/$name.err")" = "$nodes" ]
    check "$name: rank 0 started the job with no worker threads" grep -q "starting the job (0 workers here)" "$TMP/$name.err"
}

job ring 4 --phx-workers=0 --phx-ft=1 "$BIN/ring" 300
check "ring: 4 nodes x 300 laps OK" grep -q "ring: 4 nodes x 300 laps = 1200 hops .*OK" "$TMP/ring.out"
job fib 3 --phx-workers=0 --phx-ft=1 "$BIN/fib" 18
check "fib(18) = 2584 OK" grep -q "fib(18) = 2584 .*OK" "$TMP/fib.out"
job fib4c 2 --phx-workers=0 --phx-td=4c "$BIN/fib" 15
check "fib(15) = 610 OK under td=4c" grep -q "fib(15) = 610 .*OK" "$TMP/fib4c.out"
job lat 2 --phx-workers=0 --phx-ft=1 --phx-busy-poll "$BIN/pingpong" lat 2000
check "pingpong lat, spinning: 2000 round trips measured" grep -Eq "pingpong lat size=8 n=2000 median_us=[0-9.]+" "$TMP/lat.out"
job rate 2 --phx-workers=0 --phx-ft=1 --phx-send-buffer=64k "$BIN/pingpong" rate 100000
check "pingpong rate: all 100000 messages arrived" grep -Eq "pingpong rate size=8 n=100000 msgs_per_s=[0-9]+" "$TMP/rate.out"
job bw 2 --phx-workers=0 --phx-ft=1 "$BIN/pingpong" bw 50 1048576
check "pingpong bw: 50 MiB arrived" grep -Eq "pingpong bw size=1048576 n=50 MiB_per_s=[0-9.]+" "$TMP/bw.out"
# The launcher's periodic status line ("phx: status: ... 0 dead, 0 fenced",
# every 10 s) names the counts even when they are 0: a slow job on a loaded
# host is not a suspicion.
for j in ring fib lat rate bw; do
    check "$j: no node suspected or declared dead" \
        bash -c "! grep -v '^phx: status:' '$TMP/$j.err' | grep -Eq 'is dead|suspect|fenced|lost'"
done

# Recovery modes pause worker threads: refused with a reason, exit 2.
timeout -k 5 "$JOB_TIMEOUT" "$BIN/phx" run -n 2 --phx-workers=0 --phx-ft=1 --phx-recovery=cr "$BIN/fib" 10 \
    >"$TMP/cr.out" 2>"$TMP/cr.err"
rc=$?
check "workers=0 with recovery=cr: exit 2 (rc $rc)" [ "$rc" = 2 ]
check "workers=0 with recovery=cr: says why" grep -q "workers=0 (inline mode) .*recovery=cr" "$TMP/cr.err"
# A call that waits for the comm thread (agreement) would wait on itself:
# it returns at once, saying why, rather than hang the node.
timeout -k 5 "$JOB_TIMEOUT" "$BIN/phx" run -n 2 --phx-workers=0 --phx-ft=1 "$BIN/agree" -k 2 \
    >"$TMP/agree.out" 2>"$TMP/agree.err"
rc=$?
check "agree inline: ends (rc $rc, not the timeout's 124)" [ "$rc" != 124 ]
check "agree inline: phx_agree returns 'not supported'" grep -q "agree k=0 .*rc=Operation not supported" "$TMP/agree.out"
check "agree inline: the node says why" grep -q "need worker threads: not available with workers=0" "$TMP/agree.err"
# The default stays threaded: auto picks at least one worker thread.
job_auto() {
    timeout -k 5 "$JOB_TIMEOUT" "$BIN/phx" run -n 2 "$BIN/fib" 12 >"$TMP/auto.out" 2>"$TMP/auto.err"
}
job_auto
check "default workers (auto): threads, not inline" eval \
    'grep -Eq "starting the job \([1-9][0-9]* workers here\)" "$TMP/auto.err" && ! grep -q "inline mode" "$TMP/auto.err"'
finish
