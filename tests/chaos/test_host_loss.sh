#!/bin/bash
# Whole-host loss: 8 nodes on a 2-host hostfile on loopback
# (127.0.0.2 and 127.0.0.3, 4 slots each), and every rank of one host
# SIGKILLed at once: 4 failures, past the hypercube broadcast's bound
# (floor(log2 8) - 1 = 2), so survivors that missed a broadcast copy must
# catch up through the heartbeat digest / DSET repair (ft/hb/README.md).
# The app is phx-ftcheck (tests/integration/ftcheck.c) in mode `lose 4 4
# PHASE`: after a first agreement, ranks 4-7 (host 127.0.0.3) SIGKILL
# themselves at the same point of agreement 1 (PHASE before, sent or
# decided: the seed picks it), so the kill lands inside the work by
# construction; every survivor then waits until its own detector has
# noticed all four (a detector that never converges hangs the run: the
# timeout guard reports it), agrees once more and prints its dead set.
# Checks per run: no hang (124), every survivor's event log holds the dead
# set {4,5,6,7} (phx-chaos-check: all four notices everywhere, agreement),
# nobody was fenced, the four survivors printed the same line, and the exit
# code is the one ftcheck documents: 0 (it registers phx_on_failure).
# Usage: test_host_loss.sh BINDIR
# Env: PHX_HB_TIMEOUT (delta, ms; default 1000: every wait derives from it),
#      RUNS (default 20), SEED (base seed; default from the pid, printed).
set -u
BIN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../integration/lib.sh"
PHX=$BIN/phx
CHECK=$HERE/../../tools/chaos/phx-chaos-check
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || { echo "SKIP: python3 is needed by phx-chaos-check"; exit 77; }
"$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.3", 0))' 2>/dev/null ||
    { echo "SKIP: cannot bind 127.0.0.3 (loopback aliases not routed here)"; exit 77; }
DELTA_MS=${PHX_HB_TIMEOUT:-1000}
RUNS=${RUNS:-20}
SEED=${SEED:-$(( ($$ * 2654435761) % 4294967296 ))}
unset PHX_TD PHX_FT PHX_EVENTLOG PHX_HB_PERIOD PHX_WORKERS
export PHX_TD=none PHX_FT=1 PHX_HB_TIMEOUT=$DELTA_MS PHX_WORKERS=1
echo "# 8 nodes on 2 hosts, host 2's 4 ranks killed, $RUNS runs, delta=${DELTA_MS}ms seed=$SEED"
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
T_ALL=$(now_ms)
printf '127.0.0.2 slots=4\n127.0.0.3 slots=4\n' >"$TMP/hosts"
GUARD=$(( 20 + 10 * DELTA_MS / 1000 ))
phases=(before sent decided)
bad_runs=0
for i in $(seq 1 "$RUNS"); do
    s=$(( (SEED + i) % 4294967296 ))
    ph=${phases[$(( s % 3 ))]}
    dead=4,5,6,7
    JOB=$TMP/run$i; mkdir -p "$JOB"
    PHX_EVENTLOG="$JOB/ev.%r.jsonl" timeout -k 5 "$GUARD" \
        "$PHX" run -f "$TMP/hosts" -n 8 "$BIN/phx-ftcheck" lose 4 4 "$ph" >"$JOB/out" 2>"$JOB/err"
    rc=$?
    "$PY" "$CHECK" -e "$JOB/ev.%r.jsonl" --expect-dead "$dead" >"$JOB/check.out" 2>&1
    c=$?
    fenced=$(cat "$JOB"/ev.*.jsonl | grep -c '"ev":"fenced"')
    lines=$(sed -n 's/^\[[0-3]\] ftcheck rank [0-3]: //p' "$JOB/out" | sort | uniq -c | awk '{ $1 = $1; print }')
    what="seed $s: ranks $dead die $ph agreement 1"
    if [ "$rc" = 0 ] && [ "$c" = 0 ] && [ "$fenced" = 0 ] && [[ "$lines" == "4 dead=[$dead] "* ]]; then
        ok "run $i ($what): survivors agree on {$dead}, same results, exit 0"
    else
        fail "run $i ($what): job rc $rc (124 = hung), checker rc $c, fenced $fenced, survivors printed: $lines"
        grep -E "RESULT|^  - " "$JOB/check.out" | head -8 | sed 's/^/#   /'
        tail -n 3 "$JOB/err" | sed 's/^/#   /'
        d=$(mktemp -d "${TMPDIR:-/tmp}/phx-hostloss-fail.XXXXXX") && cp -r "$JOB"/. "$d" &&
            echo "#   logs kept in $d"
        bad_runs=$((bad_runs + 1))
    fi
    rm -rf "$JOB"
done
echo "# $bad_runs bad runs of $RUNS; total $(( $(now_ms) - T_ALL )) ms"
finish
