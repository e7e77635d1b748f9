#!/bin/bash
# phx run's status line (tools/phx/phx_status.h): live on a terminal
# (script(1) gives it one), plain lines on a pipe, a kill shows as "1 dead",
# nothing with --quiet. Usage: test_status.sh BIN SRC
BIN=$1; SRC=$2
. "$SRC/tests/integration/lib.sh"
PHX="$BIN/phx"
export PHX_WORKERS=1 PHX_FT=1
D=$(( $(hb_ms) * 30 ))   # bound for anything that waits on the job

# 1. Terminal: the live line shows every node up and the whole progress.
if command -v script >/dev/null; then
    G=$(gate_new tty)
    script -qfec "$PHX run -n 4 $BIN/phx-steps --hold-until $G 40 5" "$TMP/tty" >/dev/null 2>&1 &
    PIDS="$PIDS $!"; SP=$!
    check "terminal: live line with all progress" \
        wait_event "$TMP/tty" 'phx: \[[0-9hms]+\] 4 up, 0 dead, 0 fenced \| epoch 0 \| 0 rec \| 160/160 100.0%' $D
    gate_open "$G"
    wait $SP; RC=$?
    check "terminal: job exits 0" [ $RC = 0 ]
    check "terminal: line redrawn in place" grep -q $'\r\033\\[Kphx: \\[' "$TMP/tty"
    check "terminal: result printed" grep -q 'steps: 4 of 4 nodes finished 40 steps, 0 failed' "$TMP/tty"
else
    echo "skip - no script(1) for the terminal case"
fi

# 2. Pipe, with a kill: rank 2 is held at step 10 (inside its work) and
#    killed there; a plain status line reports it dead.
G=$(gate_new pipe)
PHX_EVENTLOG="$TMP/ev.%r.jsonl" "$PHX" run -n 4 --pidfile "$TMP/pids" "$BIN/phx-steps" --hold-until "$G" \
    --hold-rank 2 --hold-at 10 40 5 >"$TMP/out" 2>"$TMP/err" &
JP=$!; PIDS="$PIDS $JP"
wait_event "$TMP/ev.2.jsonl" '"ev":"steps_hold"' $D >/dev/null
VP=$(awk '$1 == 2 { print $2 }' "$TMP/pids")
kill -9 "$VP"
gone "$VP" $D
check "pipe: the kill is reported as 1 dead" wait_event "$TMP/err" '^phx: status: \[[0-9hms]+\] 3 up, 1 dead, 0 fenced' $D
gate_open "$G"
wait $JP; RC=$?
check "pipe: job exits 0 with the survivors' result" \
    eval '[ $RC = 0 ] && grep -q "steps: 3 of 4 nodes finished 40 steps, 1 failed" "$TMP/out"'
check "pipe: no terminal control codes" eval '! grep -q $'"'"'\033'"'"' "$TMP/err"'

# 3. Periodic plain lines (PHX_STATUS_INTERVAL), and none with --quiet.
PHX_STATUS_INTERVAL=0.001 "$PHX" run -n 2 "$BIN/phx-steps" 40 5 >"$TMP/out" 2>"$TMP/err"
# The line fits 79 columns: "done/total" is the first part to go when the
# rate and ETA need the room, the percentage stays.
check "pipe: periodic lines" eval '[ $? = 0 ] && grep -Eq "^phx: status: .*(/80 |[0-9]\.[0-9]%)" "$TMP/err"'
PHX_STATUS_INTERVAL=0.001 "$PHX" run --quiet -n 2 "$BIN/phx-steps" 40 5 >"$TMP/out" 2>"$TMP/err"
check "--quiet: exit 0, nothing on stderr" eval '[ $? = 0 ] && [ ! -s "$TMP/err" ]'
finish
