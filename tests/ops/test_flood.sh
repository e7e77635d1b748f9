#!/bin/bash
# A failure must not flood the log: fib under --phx-ft=1 with no recovery
# mode, rank 2 SIGKILLed while it holds tasks. Messages the survivors keep
# sending to the dead rank are counted (phx_messages_dropped_total), not
# logged one by one. The job ends with exit 76 (work lost), a summary that
# names rank 2, no live rank fenced, and fewer than 100 lines of log.
# fib 40 (about 3e8 tasks) cannot finish before the kill: the test kills
# only once rank 2's /metrics shows it created tasks.
# Usage: test_flood.sh BIN SRC
BIN=$1; SRC=$2
. "$SRC/tests/integration/lib.sh"
PHX="$BIN/phx"
export PHX_WORKERS=1
command -v curl >/dev/null || skip "curl is not installed"
D=$(( $(hb_ms) * 30 ))
B=$(port_base); MP=$((B + 100))

PHX_METRICS_PORT=$MP PHX_EVENTLOG="$TMP/ev.%r.jsonl" "$PHX" run -n 4 --pidfile "$TMP/pids" "$BIN/fib" 40 --phx-ft=1 \
    >"$TMP/out" 2>"$TMP/err" &
JP=$!; PIDS="$PIDS $JP"
wait_event "$TMP/ev.2.jsonl" '"ev":"metrics"' $D >/dev/null || { cat "$TMP/err"; fail "rank 2 serves no metrics"; finish; }
tasks() { curl -sf "http://127.0.0.1:$((MP + 2))/metrics" | awk '/^phx_tasks_created_total / { print $2 }'; }
end=$(( $(now_ms) + D ))
until [ "$(tasks)" -gt 1000 ] 2>/dev/null; do
    [ "$(now_ms)" -lt $end ] || { fail "rank 2 created no tasks within $D ms"; finish; }
    sleep 0.05
done
VP=$(awk '$1 == 2 { print $2 }' "$TMP/pids")
kill -9 "$VP"
gone "$VP" $D
wait $JP; RC=$?
L=$(wc -l <"$TMP/err")
check "exit 76 (work lost), got $RC" [ "$RC" = 76 ]
check "the summary names rank 2" grep -q "^phx: exit 76 (work lost): rank(s) 2 (SIGKILL)" "$TMP/err"
check "no live rank fenced" eval '! grep -q "fenced (declared dead\|declared dead by the cluster\|([0-9]*) fenced\|, [1-9][0-9]* fenced" "$TMP/err"'
check "fewer than 100 log lines (got $L)" [ "$L" -lt 100 ]
check "no line repeats the rank" eval '! grep -q "^\[[0-9]*\] \[rank" "$TMP/err"'
[ "$FAIL" = 0 ] || { echo "--- stderr (head)"; head -40 "$TMP/err"; }

# keep-going=1: the survivors go on with their share, sending results to
# the dead rank's tasks all along. Those messages are counted, not logged:
# the test waits until a survivor's count is above 10000, then stops the job.
PHX_METRICS_PORT=$MP "$PHX" run -n 4 --pidfile "$TMP/pids2" "$BIN/fib" 40 --phx-ft=1 --phx-keep-going=1 \
    >"$TMP/out2" 2>"$TMP/err2" &
JP=$!; PIDS="$PIDS $JP"
until [ -s "$TMP/pids2" ] && [ "$(tasks)" -gt 1000 ] 2>/dev/null; do
    kill -0 $JP 2>/dev/null || { fail "keep-going: the job ended early"; finish; }
    sleep 0.05
done
VP=$(awk '$1 == 2 { print $2 }' "$TMP/pids2")
kill -9 "$VP"
gone "$VP" $D
dropped() {
    for r in 0 1 3; do
        curl -sf "http://127.0.0.1:$((MP + r))/metrics" |
            awk '/^phx_messages_dropped_total\{reason="peer_dead"\} / && $2 > 10000 { f = 1 } END { exit !f }' && return 0
    done
    return 1
}
end=$(( $(now_ms) + D ))
until dropped; do
    [ "$(now_ms)" -lt $end ] && kill -0 $JP 2>/dev/null || break
    sleep 0.1
done
check "keep-going: a survivor counted over 10000 messages to the dead rank" dropped
kill -TERM $JP; wait $JP
L=$(wc -l <"$TMP/err2")
check "keep-going: no message logged one by one (none says 'dropped')" eval '! grep -q "dropped" "$TMP/err2"'
check "keep-going: fewer than 100 log lines (got $L)" [ "$L" -lt 100 ]
[ "$FAIL" = 0 ] || { echo "--- stderr (head)"; head -40 "$TMP/err2"; }
finish
