#!/bin/bash
# A SIGKILLed node is known everywhere from its closed connections, not from
# the heartbeat timeout, whichever rank it was. 4 loopback nodes, PHX_FT=1,
# idle, with a long delta (PHX_HB_TIMEOUT, default here 8000 ms); one job
# per victim: rank 0, the last rank (whose ring observer is rank 0, the one
# side of that pair that does not redial) and a middle rank. The kernel
# closes a killed process's sockets, its listener first, so its observer
# learns within milliseconds that the rank's port refuses connections. Each
# kill must reach every survivor's notice within delta/2: the timeout path
# (silence for delta) cannot make that, whatever the load.
# Usage: test_ft_kill.sh BINDIR. Env: PHX_HB_TIMEOUT (delta, ms).
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
CHECK=$(dirname "$0")/../../tools/chaos/phx-chaos-check
N=4
DELTA_MS=${PHX_HB_TIMEOUT:-8000}
unset PHX_TD PHX_FT PHX_EVENTLOG PHX_HB_PERIOD PHX_WORKERS
export PHX_TD=none PHX_FT=1 PHX_HB_TIMEOUT=$DELTA_MS PHX_WORKERS=1 PHX_KILL_GRACE=0.5
echo "# $N nodes, delta=${DELTA_MS}ms"
poll_ms() {
    local end=$(( $(now_ms) + $1 )); shift
    while [ "$(now_ms)" -lt "$end" ]; do "$@" && return 0; sleep 0.02; done
    "$@"
}
ev() { cat "$JOB"/ev.*.jsonl 2>/dev/null | grep "\"ev\":\"$1\"" | grep -c -- "${2:-}"; }
all_started() { [ "$(ev start)" -ge "$N" ]; }
all_noticed() { [ "$(ev notice "\"dead\":$V,")" -ge $((N - 1)) ]; }
within() { [ "$1" -ge 0 ] && [ "$1" -le "$2" ]; }
pid_of() { awk -v r="$1" '$1 == r { print $2 }' "$JOB/pids"; }

for V in 0 $((N - 1)) 1; do
    JOB=$TMP/v$V; mkdir -p "$JOB"
    # Idle (no spinners) and long: the job lasts until the test ends it.
    PHX_EVENTLOG="$JOB/ev.%r.jsonl" timeout -k 5 $(( 3 * DELTA_MS / 1000 + 60 )) \
        "$PHX" run -n $N --pidfile "$JOB/pids" "$BIN/busy" 600 50 0 >"$JOB/out" 2>"$JOB/err" &
    L=$!; PIDS="$PIDS $L"
    if ! poll_ms 30000 all_started; then
        fail "victim $V: all $N nodes log start"; kill "$L"; wait "$L"; continue
    fi
    p=$(pid_of "$V"); t=$(date +%s%N)
    kill -KILL "$p"
    printf '{"t":%s,"ev":"kill","rank":%d,"pid":%d,"signal":"SIGKILL"}\n' "$t" "$V" "$p" >"$JOB/kills.jsonl"
    poll_ms $(( 3 * DELTA_MS )) all_noticed
    kill "$L" 2>/dev/null; wait "$L" 2>/dev/null
    lat=$("$CHECK" -e "$JOB/ev.%r.jsonl" -k "$JOB/kills.jsonl" --json 2>/dev/null | python3 -c 'import json,sys
f = json.load(sys.stdin)["failures"]; l = f[0]["last"] if f else None
print("%.0f" % l["latency_ms"] if l and l["complete"] and l["latency_ms"] is not None else "-1")')
    echo "# victim $V: kill -> last survivor's notice ${lat} ms"
    check "victim $V: every survivor noticed the kill" all_noticed
    check "victim $V: within delta/2 = $((DELTA_MS / 2)) ms (${lat} ms): the closed port, not the timeout" \
        within "${lat:--1}" $((DELTA_MS / 2))
done
finish
