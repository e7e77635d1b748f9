#!/bin/bash
# Recovery you can see: a kill during a cr run and during an mlog-causal
# run of jacobi (4 nodes), each checked through
#   - phx run's one recovery line (exact shape, with its phases);
#   - `phx status --json` during the recovery (mlog: the replay's release is
#     held, PHX_MLOG_TEST_HOLD_RELEASE) and after it;
#   - Debian's Prometheus, which finds the nodes through phx run's
#     --metrics-sd file_sd list and scrapes them: the recovery counters and
#     histograms moved (skipped, visibly, when Prometheus cannot start);
#   - phx-timeline's data: one series per rank, the recovery, the commits.
# Kills land by construction: after jacobi's hold (iteration 350; the
# checkpoint due next waits for the gate) and two commits everywhere.
# Usage: test_recovery.sh BIN SRC [OUTDIR]  (OUTDIR keeps the timelines)
BIN=$1; SRC=$2; KEEP=$3
. "$SRC/tests/integration/lib.sh"
PHX="$BIN/phx"
export PHX_WORKERS=1
# A loaded machine (a second copy of the suite) stalls nodes for a second or
# more: a wider detector timeout keeps a live node from being suspected.
export PHX_HB_TIMEOUT=${PHX_HB_TIMEOUT:-3000}
N=4
D=$(( $(hb_ms) * 30 ))
JOB_TIMEOUT=$(( 60 + 20 * $(hb_ms) / 1000 ))
B=$(port_base); PP=$((B + 200))
ARGS="-N 256 -i 2000 -c 100"
ref=$("$BIN/jacobi" --seq $ARGS -P $N | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
[ -n "$ref" ] || { fail "jacobi --seq printed no checksum"; finish; }
PY=/usr/bin/python3

# Prometheus with one file_sd job: the list phx run keeps.
SD=$TMP/sd.json
PROM=$(command -v prometheus)
prom_ok=0
if [ -n "$PROM" ] && command -v curl >/dev/null; then
    mkdir -p "$TMP/prom"
    cat >"$TMP/prom.yml" <<YML
global: { scrape_interval: 250ms, scrape_timeout: 200ms }
scrape_configs:
  - job_name: phx
    file_sd_configs: [ { files: ['$SD'], refresh_interval: 1s } ]
YML
    "$PROM" --config.file="$TMP/prom.yml" --storage.tsdb.path="$TMP/prom" --web.listen-address="127.0.0.1:$PP" \
        >"$TMP/prom.log" 2>&1 &
    PRP=$!; PIDS="$PIDS $PRP"
    end=$(( $(now_ms) + 60000 ))
    until curl -sf "http://127.0.0.1:$PP/-/ready" >/dev/null; do
        kill -0 $PRP 2>/dev/null && [ "$(now_ms)" -lt $end ] || break
        sleep 0.1
    done
    curl -sf "http://127.0.0.1:$PP/-/ready" >/dev/null && prom_ok=1
fi
[ $prom_ok = 1 ] || echo "SKIP: the Prometheus checks: prometheus ${PROM:-is not installed} (could not start; $(tail -1 "$TMP/prom.log" 2>/dev/null))"
q() { curl -sf --data-urlencode "query=$1" "http://127.0.0.1:$PP/api/v1/query"; }
# wait_q QUERY VALUE: until the instant query's value is VALUE (bounded by D).
wait_q() {
    _end=$(( $(now_ms) + D ))
    while :; do
        got=$(q "$1" | grep -o '"value":\[[^]]*\]')
        [[ "$got" == *"\"$2\""* ]] && return 0
        [ "$(now_ms)" -ge $_end ] && { echo "  $1 -> ${got:-nothing}"; return 1; }
        sleep 0.2
    done
}
pcheck() { if [ $prom_ok = 1 ]; then check "$@"; fi; }

status_json() { "$PHX" status --json "$JP" 2>/dev/null; }
# js PYTHON-EXPR: evaluates EXPR on the status JSON (as d); true if truthy.
js() { status_json | "$PY" -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)" 2>/dev/null; }
wait_js() { wait_for $(( D / 1000 + 1 )) js "$1"; }
replay_holds() { [ "$(grep -ls '"ev":"mlog_release_held"' "$DIR"/ev.*.jsonl | wc -l)" = $((N - 1)) ]; }

# run_case NAME MODE PORT: the job, the kill of rank 2, the checks.
run_case() {
    NAME=$1; MODE=$2; MP=$3
    DIR=$TMP/$NAME; mkdir -p "$DIR"
    GATE=$(gate_new "$NAME"); RGATE=$(gate_new "$NAME-release")
    inst="instance=~\"127.0.0.1:($MP|$((MP + 1))|$((MP + 2))|$((MP + 3)))\""
    local hold=""
    [ "$MODE" = mlog-causal ] && hold=$RGATE
    PHX_MLOG_TEST_HOLD_RELEASE=$hold PHX_METRICS_PORT=$MP timeout -k 5 $JOB_TIMEOUT "$PHX" run -n $N --metrics-sd "$SD" \
        --pidfile "$DIR/pids" "$BIN/jacobi" --phx-ft=1 --phx-recovery="$MODE" \
        --phx-eventlog="$DIR/ev.%r.jsonl" $ARGS -H 350 -g "$GATE" >"$DIR/out" 2>"$DIR/err" &
    JP=$!; JOB=$!; PIDS="$PIDS $JP"
    wait_event "$DIR/ev.*.jsonl" '"ev":"jacobi_hold"' $D >/dev/null || { fail "$NAME: the hold never logged"; return; }
    wait_for $(( D / 1000 )) settled 2 || { fail "$NAME: checkpoints never settled"; return; }
    # JP is the timeout process; the launcher is its child (its pid names the job).
    JP=$(pgrep -P "$JP" -x phx || echo "$JP")
    check "$NAME: file_sd list names the 4 nodes with rank, host and incarnation" eval \
        '[ "$(grep -c "\"targets\":\[\"127.0.0.1:$MP\|\"targets\":\[\"127.0.0.1:$((MP + 1))\|\"targets\":\[\"127.0.0.1:$((MP + 2))\|\"targets\":\[\"127.0.0.1:$((MP + 3))" "$SD")" = 4 ] && grep -q "\"labels\":{\"rank\":\"2\",\"host\":\"127.0.0.1\",\"incarnation\":\"0\"}" "$SD"'
    pcheck "$NAME: prometheus scrapes the 4 nodes found through file_sd" wait_q "count(up{$inst} == 1)" 4
    pcheck "$NAME: prometheus: checkpoints committed on every node (phx_checkpoints_total >= 2)" \
        wait_q "count(phx_checkpoints_total{$inst} >= 2)" 4
    check "$NAME: phx status --json before the kill: 4 ranks up, epoch above 0" \
        wait_js 'len(d["ranks"]) == 4 and all(r["state"] == "up" for r in d["ranks"]) and d["epoch"] > 0 and d["checkpoints"] >= 2'
    if grep -q "fenced\|killed by signal" "$DIR/err"; then
        fail "$NAME: a node was lost before the test's kill (an overloaded machine?)"; sed 's/^/#   /' "$DIR/err"; return
    fi
    VP=$(awk '$1 == 2 { print $2 }' "$DIR/pids")
    kill -9 "$VP"
    gone "$VP" $D || fail "$NAME: rank 2 outlived SIGKILL"
    if [ "$MODE" = mlog-causal ]; then
        # During the recovery: the survivors hold the replay's release.
        wait_for $(( D / 1000 )) replay_holds || fail "$NAME: the survivors never held their release"
        check "$NAME: phx status --json during the recovery: rank 2 killed, 3 up, no recovery done yet" \
            wait_js 'd["ranks"][2]["state"] == "killed" and d["ranks"][2]["signal"] == 9 and sum(r["state"] == "up" for r in d["ranks"]) == 3 and d["recoveries"] == []'
        check "$NAME: no recovery line while the replay is held" eval '! grep -q "recovered in" "$DIR/err"'
        gate_open "$RGATE"
    fi
    wait_event "$DIR/err" 'recovered in' $D >/dev/null
    local kind="rolled back" rep="0"
    [ "$MODE" = mlog-causal ] && kind="partial rollback" rep="[1-9][0-9]*"
    check "$NAME: one recovery line, its exact shape with the phases" eval \
        '[ "$(grep -c "recovered in" "$DIR/err")" = 1 ] && grep -Eq "^phx: rank 2 lost \(SIGKILL, 127\.0\.0\.1\) at [0-9]+\.[0-9] s · $kind to epoch [1-9][0-9]* · recovered in [0-9]+ ms \(detect [0-9]+, agree [0-9]+, transfer [0-9]+, replay $rep\)( · [0-9]+ link warnings? folded)?$" "$DIR/err"'
    local want="global"; [ "$MODE" = mlog-causal ] && want="partial"
    check "$NAME: phx status --json after the recovery: one $want recovery of rank 2 with its phases" \
        wait_js 'len(d["recoveries"]) == 1 and d["recoveries"][0]["kind"] == "'$want'" and d["recoveries"][0]["lost"] == [2] and d["recoveries"][0]["epoch"] >= 1 and all(k in d["recoveries"][0] for k in ("detect_ms", "agree_ms", "transfer_ms", "replay_ms")) and abs(d["recoveries"][0]["total_ms"] - sum(d["recoveries"][0][k] for k in ("detect_ms", "agree_ms", "transfer_ms", "replay_ms"))) < 0.01 and d["ranks"][2]["state"] == "killed"'
    check "$NAME: the human phx status names the recovery" eval '"$PHX" status "$JP" | grep -q "rank(s) 2 lost"'
    check "$NAME: file_sd list leaves the dead rank out" eval \
        '! grep -q "\"rank\":\"2\"" "$SD" && [ "$(grep -c "\"targets\"" "$SD")" = 3 ]'
    if [ $prom_ok = 1 ]; then
        pcheck "$NAME: prometheus: 3 survivors counted a $want recovery" \
            wait_q "sum(phx_recoveries_total{$inst,kind=\"$want\"})" 3
        pcheck "$NAME: prometheus: phase histograms observed on 3 nodes" \
            wait_q "sum(phx_recovery_phase_seconds_count{$inst,phase=\"agree\"}) + sum(phx_recovery_phase_seconds_count{$inst,phase=\"transfer\"}) + sum(phx_recovery_phase_seconds_bucket{$inst,phase=\"replay\",le=\"+Inf\"})" 9
        pcheck "$NAME: prometheus: recovery time histogram, 3 observations" \
            wait_q "sum(phx_recovery_seconds_count{$inst})" 3
        pcheck "$NAME: prometheus: detection latency observed and rank 2 fenced out on 3 nodes" \
            wait_q "sum(phx_detection_latency_seconds_count{$inst}) + sum(phx_ranks_fenced_total{$inst})" 6
        pcheck "$NAME: prometheus: tasks restored" wait_q "sum(phx_tasks_restored_total{$inst}) > bool 0" 1
        pcheck "$NAME: prometheus: phx_epoch moved" wait_q "max(phx_epoch{$inst}) > bool 0" 1
        if [ "$MODE" = mlog-causal ]; then
            pcheck "$NAME: prometheus: replay phase took the held time (> 0 s) on some node" \
                wait_q "max(phx_recovery_phase_seconds_sum{$inst,phase=\"replay\"}) > bool 0" 1
            pcheck "$NAME: prometheus: messages replayed, determinants and logged bytes counted" \
                wait_q "(sum(phx_messages_replayed_total{$inst}) > bool 0) + (sum(phx_determinants_total{$inst}) > bool 0) + (sum(phx_logged_bytes_total{$inst}) > bool 0)" 3
        fi
    fi
    gate_open "$GATE"
    wait $JOB; RC=$?
    sum=$(sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' "$DIR/out" | tail -1)
    check "$NAME: exit 0 with the fault-free checksum (rc $RC, $sum)" eval '[ "$RC" = 0 ] && [ "$sum" = "$ref" ]'
    check "$NAME: the job directory is gone after the job" eval '! "$PHX" status "$JP" >/dev/null 2>&1'
    if "$PY" -c 'import matplotlib' 2>/dev/null; then
        OUT=${KEEP:-$DIR}/timeline-$NAME
        mkdir -p "${KEEP:-$DIR}"
        "$PY" "$SRC/tools/timeline/phx-timeline" -e "$DIR/ev.%r.jsonl" -o "$OUT" \
            --title "jacobi on 4 nodes, recovery=$MODE, rank 2 killed" >"$DIR/tl.out" 2>&1
        check "$NAME: timeline data: one series per rank, the recovery, commits" eval \
            '"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); s=d[\"series\"]; sys.exit(0 if sorted(s) == [\"0\",\"1\",\"2\",\"3\"] and all(len(v) > 5 for v in s.values()) and max(y for x, y in s[\"0\"]) > 0.99 and len(d[\"recoveries\"]) == 1 and d[\"failures\"] == [2] and all(len(d[\"commits\"].get(r, [])) >= 2 for r in \"013\") else 1)" "$OUT.json"'
    else
        echo "skip - timeline: no python3-matplotlib for /usr/bin/python3"
    fi
}

# restart-on=respawn: phx run restarts rank 2 as incarnation 1. The status
# line counts it up again (and fits 80 columns), phx status shows the new
# incarnation and pid, the file_sd list names it with incarnation 1.
run_respawn() {
    NAME=respawn; MP=$1
    DIR=$TMP/$NAME; mkdir -p "$DIR"
    GATE=$(gate_new "$NAME")
    PHX_STATUS_INTERVAL=0.3 PHX_METRICS_PORT=$MP timeout -k 5 $JOB_TIMEOUT "$PHX" run -n $N --metrics-sd "$SD" \
        --pidfile "$DIR/pids" "$BIN/jacobi" --phx-ft=1 --phx-recovery=cr --phx-restart-on=respawn \
        --phx-eventlog="$DIR/ev.%r.jsonl" $ARGS -H 350 -g "$GATE" >"$DIR/out" 2>"$DIR/err" &
    JP=$!; JOB=$!; PIDS="$PIDS $JP"
    wait_event "$DIR/ev.*.jsonl" '"ev":"jacobi_hold"' $D >/dev/null || { fail "$NAME: the hold never logged"; return; }
    wait_for $(( D / 1000 )) settled 2 || { fail "$NAME: checkpoints never settled"; return; }
    JP=$(pgrep -P "$JP" -x phx || echo "$JP")
    VP=$(awk '$1 == 2 { print $2 }' "$DIR/pids")
    kill -9 "$VP"
    gone "$VP" $D || fail "$NAME: rank 2 outlived SIGKILL"
    wait_event "$DIR/err" 'rank 2 respawned as incarnation 1' $D >/dev/null || { fail "$NAME: no respawn"; return; }
    check "$NAME: phx status --json: rank 2 up again as incarnation 1 with a new pid" \
        wait_js 'd["ranks"][2]["incarnation"] == 1 and d["ranks"][2]["state"] == "up" and d["ranks"][2]["pid"] != '"$VP"
    check "$NAME: file_sd list names rank 2 with incarnation 1" eval \
        'wait_for $(( D / 1000 )) grep -q "\"labels\":{\"rank\":\"2\",\"host\":\"127.0.0.1\",\"incarnation\":\"1\"}" "$SD" && [ "$(grep -c "\"targets\"" "$SD")" = 4 ]'
    pcheck "$NAME: prometheus scrapes rank 2's new incarnation" \
        wait_q "count(up{instance=\"127.0.0.1:$((MP + 2))\",incarnation=\"1\"} == 1)" 1
    # A status line after the respawn (the one before the kill says the same).
    up_again() { sed -n '/rank 2 respawned as incarnation 1/,$p' "$DIR/err" | grep -Eq '^phx: status: \[[0-9hms]+\] 4 up, 0 dead, 0 fenced'; }
    check "$NAME: the status line counts the respawned rank as up" wait_for $(( D / 1000 )) up_again
    gate_open "$GATE"
    wait $JOB; RC=$?
    sum=$(sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' "$DIR/out" | tail -1)
    check "$NAME: exit 0 with the fault-free checksum (rc $RC, $sum)" eval '[ "$RC" = 0 ] && [ "$sum" = "$ref" ]'
    check "$NAME: every status line fits 80 columns" eval '! grep "^phx: status:" "$DIR/err" | awk "length > 80 { bad = 1 } END { exit !bad }"'
}

run_case cr cr $((B + 100))
run_case mlog mlog-causal $((B + 110))
run_respawn $((B + 120))

# The shipped Prometheus config and Grafana dashboard (tools/ops): the
# config passes promtool; every dashboard query is one Prometheus accepts,
# and the recovery panels have data after the two runs above.
if command -v promtool >/dev/null; then
    check "tools/ops/prometheus.yml passes promtool check config" \
        eval 'promtool check config "$SRC/tools/ops/prometheus.yml" >/dev/null 2>&1'
fi
if [ $prom_ok = 1 ]; then
    "$PY" - "$SRC/tools/ops/grafana-phalanx.json" >"$TMP/exprs" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for p in d["panels"]:
    for t in p["targets"]:
        print(t["expr"].replace("$job", "phx"))
PY
    bad=0; nq=0
    while IFS= read -r e; do
        nq=$((nq + 1))
        q "$e" | grep -q '"status":"success"' || { echo "  refused: $e"; bad=$((bad + 1)); }
    done <"$TMP/exprs"
    check "grafana dashboard: Prometheus accepts all $nq queries" eval '[ $bad = 0 ] && [ $nq -gt 20 ]'
    check "grafana dashboard: the recovery panels have data" eval \
        'q "sum by (kind) (max_over_time(phx_recoveries_total{job=\"phx\"}[10m]))" | grep -q "\"kind\":\"partial\"" && q "sum by (phase) (max_over_time(phx_recovery_phase_seconds_count{job=\"phx\"}[10m]))" | grep -q "\"phase\":\"replay\""'
fi
finish
