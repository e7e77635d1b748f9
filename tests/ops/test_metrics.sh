#!/bin/bash
# /metrics (core/metrics.c): Debian's Prometheus scrapes a running 4-node
# job and a metric comes back through its HTTP API; bad HTTP requests are
# refused while the job runs, and the job still ends with the right result.
# With fault tolerance on, rank 3 is held inside its work and killed: the
# survivors' failure notices show up in Prometheus as phx_nodes_dead.
# Usage: test_metrics.sh BIN SRC
BIN=$1; SRC=$2
. "$SRC/tests/integration/lib.sh"
PHX="$BIN/phx"
export PHX_WORKERS=1 PHX_FT=1
command -v curl >/dev/null || skip "curl is not installed"
PROM=$(command -v prometheus) || skip "Debian's prometheus is not installed (apt-get install prometheus)"
D=$(( $(hb_ms) * 30 ))
B=$(port_base); MP=$((B + 100)); PP=$((B + 200))

G=$(gate_new job)
PHX_METRICS_PORT=$MP PHX_EVENTLOG="$TMP/ev.%r.jsonl" "$PHX" run -n 4 --pidfile "$TMP/pids" "$BIN/phx-steps" --hold-until "$G" --hold-rank 3 --hold-at 5 20 5 \
    >"$TMP/out" 2>"$TMP/err" &
JP=$!; PIDS="$PIDS $JP"
for r in 0 1 2 3; do
    wait_event "$TMP/ev.$r.jsonl" '"ev":"metrics"' $D >/dev/null || { cat "$TMP/err"; skip "node $r serves no metrics"; }
done

# Bad requests: none may disturb the node.
# raw PORT PYTHON-BYTES: the server's status line, or "closed".
raw() {
    /usr/bin/python3 - "$1" "$2" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(10)
try:
    s.sendall(eval(sys.argv[2]))
    r = s.recv(100)
except OSError:
    r = b""
print(r.split(b"\r\n")[0].decode() if r else "closed")
PY
}
check "garbage request line: 400 or closed" eval '[[ "$(raw $MP "b\"GARBAGE\r\n\r\n\"")" =~ ^(HTTP/1.1\ 400|closed) ]]'
check "binary junk: 400 or closed" eval '[[ "$(raw $MP "bytes(range(256))*4+b\"\r\n\r\n\"")" =~ ^(HTTP/1.1\ 4|closed) ]]'
check "bad HTTP version: 505" eval '[[ "$(raw $MP "b\"GET /metrics HTTP/9.9\r\n\r\n\"")" == "HTTP/1.1 505"* ]]'
check "malformed header line: 400" eval '[[ "$(raw $MP "b\"GET /metrics HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n\"")" == "HTTP/1.1 400"* ]]'
check "200 kB header: 431 or closed" \
    eval '[[ "$(raw $((MP + 1)) "b\"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: \"+b\"a\"*200000+b\"\r\n\r\n\"")" =~ ^(HTTP/1.1\ 431|closed) ]]'
check "POST: 405" eval '[ "$(curl -s -o /dev/null -w %{http_code} -X POST -d x http://127.0.0.1:$((MP + 2))/metrics)" = 405 ]'
check "wrong path: 404" eval '[ "$(curl -s -o /dev/null -w %{http_code} http://127.0.0.1:$((MP + 3))/nope)" = 404 ]'
if command -v promtool >/dev/null; then
    check "exposition passes promtool check metrics" \
        eval 'curl -sf http://127.0.0.1:$((MP + 1))/metrics | promtool check metrics'
fi
check "still serving after all that" eval 'curl -sf http://127.0.0.1:$MP/metrics | grep -q "^phx_heartbeats_total\|^phx_messages_total{direction=\"sent\"}"'

# Prometheus on loopback, scraping the 4 nodes.
mkdir -p "$TMP/prom"
cat >"$TMP/prom.yml" <<YML
global: { scrape_interval: 250ms, scrape_timeout: 200ms }
scrape_configs:
  - job_name: phx
    static_configs: [ { targets: ['127.0.0.1:$MP', '127.0.0.1:$((MP + 1))', '127.0.0.1:$((MP + 2))', '127.0.0.1:$((MP + 3))'] } ]
YML
"$PROM" --config.file="$TMP/prom.yml" --storage.tsdb.path="$TMP/prom" --web.listen-address="127.0.0.1:$PP" \
    >"$TMP/prom.log" 2>&1 &
PRP=$!; PIDS="$PIDS $PRP"
q() { curl -sf --data-urlencode "query=$1" "http://127.0.0.1:$PP/api/v1/query"; }
# wait_q QUERY VALUE: until the instant query's value is VALUE (bounded by D);
# prints the last value seen.
wait_q() {
    _end=$(( $(now_ms) + D ))
    while :; do
        got=$(q "$1" | grep -o '"value":\[[^]]*\]')
        [[ "$got" == *"\"$2\""* ]] && { echo "$got"; return 0; }
        [ "$(now_ms)" -ge $_end ] && { echo "$got"; return 1; }
        sleep 0.1
    done
}
ready() { kill -0 $PRP 2>/dev/null || { tail -5 "$TMP/prom.log"; skip "prometheus could not start"; }; curl -sf "http://127.0.0.1:$PP/-/ready" >/dev/null; }
end=$(( $(now_ms) + 60000 ))
until ready; do [ "$(now_ms)" -lt $end ] || skip "prometheus not ready within 60 s"; sleep 0.1; done
# Ranks 0-2 finished their 20 steps, rank 3 is held at 5: the sum is 65.
check "prometheus: sum(phx_progress_done) over 4 nodes is 65" wait_q 'sum(phx_progress_done{job="phx"})' 65
check "prometheus: 4 targets up" wait_q 'count(up{job="phx"} == 1)' 4
check "prometheus: heartbeats flow on all 4" wait_q 'count(phx_heartbeats_total{direction="received"} > 0)' 4
wait_event "$TMP/ev.3.jsonl" '"ev":"steps_hold"' $D >/dev/null
VP=$(awk '$1 == 3 { print $2 }' "$TMP/pids")
kill -9 "$VP"
gone "$VP" $D
check "prometheus: every survivor reports 1 dead node" wait_q 'min(phx_nodes_dead{job="phx"})' 1
kill $PRP; wait $PRP 2>/dev/null

check "a port taken: the node says so and exits 1" \
    eval 'PHX_METRICS_PORT=$MP "$BIN/phx-steps" 1 0 >/dev/null 2>"$TMP/e1"; [ $? = 1 ] && grep -q "cannot serve metrics on port $MP" "$TMP/e1"'
gate_open "$G"
wait $JP; RC=$?
check "job ends with 0 and the right result" \
    eval '[ $RC = 0 ] && grep -q "steps: 3 of 4 nodes finished 20 steps, 1 failed" "$TMP/out"'

# Message logging feeds the log-size gauges: a jacobi job under mlog-causal
# with no checkpoint after the first (-c beyond its iterations), so the
# sender logs only grow; scraped once iteration 50 is logged, then stopped.
LP=$((MP + 10))
PHX_FT=1 PHX_RECOVERY=mlog-causal PHX_METRICS_PORT=$LP PHX_EVENTLOG="$TMP/ml.%r.jsonl" \
    "$PHX" run -n 2 --pidfile "$TMP/mlpids" "$BIN/jacobi" -N 64 -V 4 -i 100000000 -c 100000000 \
    >"$TMP/ml.out" 2>"$TMP/ml.err" &
MLJ=$!; PIDS="$PIDS $MLJ"
wait_event "$TMP/ml.0.jsonl" '"ev":"jacobi_iter","iter":50[,}]' $D >/dev/null
check "mlog-causal: phx_message_log_bytes and _entries above 0" eval \
    'curl -sf http://127.0.0.1:$LP/metrics | awk '"'"'/^phx_message_log_(bytes|entries) / && $2 > 0 { n++ } END { exit n != 2 }'"'"''
kill -TERM "$MLJ" 2>/dev/null
finish
