#!/bin/bash
# tools/timeline on a real run with a kill: rank 2 is held inside its work
# (step 20 of 100), killed there, the survivors go on; the diagram (PNG,
# SVG) must show the kill, the detection and the restart interval.
# Usage: test_timeline.sh BIN SRC [OUTDIR]  (OUTDIR keeps the pictures)
BIN=$1; SRC=$2; KEEP=$3
. "$SRC/tests/integration/lib.sh"
PY=/usr/bin/python3   # Debian's, which sees python3-matplotlib
"$PY" -c 'import matplotlib' 2>/dev/null || skip "no python3-matplotlib for /usr/bin/python3"
export PHX_WORKERS=1 PHX_FT=1
D=$(( $(hb_ms) * 30 ))
G=$(gate_new run)
PHX_EVENTLOG="$TMP/ev.%r.jsonl" "$BIN/phx" run --quiet -n 4 --pidfile "$TMP/pids" "$BIN/phx-steps" \
    --hold-until "$G" --hold-rank 2 --hold-at 20 --hold-all 20 100 15 >"$TMP/out" 2>"$TMP/err" &
JP=$!; PIDS="$PIDS $JP"
wait_event "$TMP/ev.2.jsonl" '"ev":"steps_hold"' $D >/dev/null || { cat "$TMP/err"; fail "rank 2 never held"; }
VP=$(awk '$1 == 2 { print $2 }' "$TMP/pids")
# Kill log as phx-chaos writes it: t read just before kill().
echo "{\"t\":$(date +%s%N),\"ev\":\"kill\",\"rank\":2,\"pid\":$VP,\"signal\":\"SIGKILL\"}" >"$TMP/kills.jsonl"
kill -9 "$VP"
gone "$VP" $D
for r in 0 1 3; do wait_event "$TMP/ev.$r.jsonl" '"ev":"notice","dead":2' $D >/dev/null; done
gate_open "$G"
wait $JP; RC=$?
check "job survives the kill with the survivors' result" \
    eval '[ $RC = 0 ] && grep -q "steps: 3 of 4 nodes finished 100 steps, 1 failed" "$TMP/out"'
OUT=${KEEP:-$TMP}/timeline
mkdir -p "${KEEP:-$TMP}"
"$PY" "$SRC/tools/timeline/phx-timeline" -e "$TMP/ev.%r.jsonl" -k "$TMP/kills.jsonl" -o "$OUT" \
    --title "steps on 4 nodes, rank 2 killed (PHX_HB_TIMEOUT=$(hb_ms) ms)" >"$TMP/tl.out" 2>&1
cat "$TMP/tl.out"
check "timeline: summary names the kill, its detection and the restart interval" \
    grep -q '^rank 2: killed at .* detected +[0-9]* ms; 3 survivors notified .* restart interval' "$TMP/tl.out"
check "timeline: PNG written (a PNG, > 20 kB)" \
    eval '[ "$(head -c 8 "$OUT.png" | od -An -c | tr -d " ")" = "211PNG\r\n032\n" ] && [ $(stat -c %s "$OUT.png") -gt 20000 ]'
check "timeline: SVG with 4 progress lines, kill and shading" \
    eval 'grep -q "<svg" "$OUT.svg" && [ $(grep -c "rank [0-3]" "$OUT.svg") -ge 4 ] && grep -q "killed" "$OUT.svg" && grep -q "detection" "$OUT.svg" && grep -q "restart interval" "$OUT.svg"'

# Events of modules still to come (checkpoints, agreement, recovery) are
# drawn when a log has them: a hand-written log with each kind.
S=1700000000000000000
{
    for r in 0 1; do for i in 0 1 2 3 4 5 6 7 8 9 10; do
        echo "{\"t\":$((S + i * 100000000)),\"rank\":$r,\"ev\":\"progress\",\"done\":$i,\"total\":10}"
    done; done
    echo "{\"t\":$((S + 200000000)),\"rank\":0,\"ev\":\"ckpt_begin\",\"epoch\":1}"
    echo "{\"t\":$((S + 300000000)),\"rank\":0,\"ev\":\"ckpt_commit\",\"epoch\":1}"
    echo "{\"t\":$((S + 500000000)),\"rank\":0,\"ev\":\"notice\",\"dead\":2,\"via\":\"local\"}"
    echo "{\"t\":$((S + 520000000)),\"rank\":0,\"ev\":\"agree_begin\"}"
    echo "{\"t\":$((S + 560000000)),\"rank\":0,\"ev\":\"agree_end\"}"
    echo "{\"t\":$((S + 560000000)),\"rank\":0,\"ev\":\"recover_begin\"}"
    echo "{\"t\":$((S + 700000000)),\"rank\":0,\"ev\":\"recover_end\"}"
    echo "{\"t\":$((S + 400000000)),\"rank\":2,\"ev\":\"progress\",\"done\":4,\"total\":10}"
    echo 'not json'
} >"$TMP/syn.0.jsonl"
"$PY" "$SRC/tools/timeline/phx-timeline" -e "$TMP/syn.%r.jsonl" -o "$TMP/syn" >"$TMP/syn.out" 2>&1
cat "$TMP/syn.out"
check "timeline: checkpoint, agreement and recovery drawn; restart interval to recovery's end" \
    eval 'grep -q "checkpoint" "$TMP/syn.svg" && grep -q "agreement" "$TMP/syn.svg" && grep -q "recovery" "$TMP/syn.svg" && grep -q "^rank 2: log ends at .*restart interval 0.300 s" "$TMP/syn.out" && grep -q "not JSON, skipped" "$TMP/syn.out"'
    eval 'grep -q "checkpoint" "$TMP/syn.svg" && grep -q "agreement" "$TMP/syn.svg" && grep -q "recovery" "$TMP/syn.svg" && grep -q "^rank 2: log ends at .*restart interval 0.300 s" "$TMP/syn.out" && grep -q "not JSON, skipped" "$TMP/syn.out"'

# --series: an app's own events, one line per key in the logging rank's
# color; a key that moves to another rank (a restored task) goes on in that
# rank's color; the restart interval ends at message logging's replay.
{
    for b in 0 1; do for i in 0 1 2 3 4; do
        echo "{\"t\":$((S + i * 100000000)),\"rank\":$b,\"ev\":\"blk\",\"blk\":$b,\"iter\":$((i * 10))}"
    done; done
    echo "{\"t\":$((S + 450000000)),\"rank\":0,\"ev\":\"notice\",\"dead\":1}"
    for i in 3 4 5; do echo "{\"t\":$((S + 500000000 + i * 10000000)),\"rank\":0,\"ev\":\"blk\",\"blk\":1,\"iter\":$((i * 10))}"; done
    echo "{\"t\":$((S + 600000000)),\"rank\":0,\"ev\":\"mlog_replay_done\",\"tasks\":1}"
} >"$TMP/ser.0.jsonl"
echo "{\"t\":$((S + 440000000)),\"rank\":1,\"signal\":\"SIGKILL\"}" >"$TMP/ser.kills"
"$PY" "$SRC/tools/timeline/phx-timeline" -e "$TMP/ser.%r.jsonl" -k "$TMP/ser.kills" -o "$TMP/ser" \
    --series blk:iter:blk --total 50 >"$TMP/ser.out" 2>&1
cat "$TMP/ser.out"
check "timeline --series: both ranks' lines, the y axis names the series, the replay ends the interval" \
    eval 'grep -q "rank 0" "$TMP/ser.svg" && grep -q "rank 1" "$TMP/ser.svg" && grep -q "blk iter / 50" "$TMP/ser.svg" && grep -q "^rank 1: killed at .*replay 0.160 s" "$TMP/ser.out"'
"$PY" "$SRC/tools/timeline/phx-timeline" -e "$TMP/ser.%r.jsonl" -o "$TMP/ser2" --series blk >"$TMP/ser2.out" 2>&1
check "timeline --series without a field is refused" grep -q "wants EV:FIELD" "$TMP/ser2.out"
finish
