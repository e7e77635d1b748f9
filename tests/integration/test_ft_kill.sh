#!/bin/bash
# A SIGKILLed node is known everywhere from its closed connections, not from
# the heartbeat timeout, whichever rank it was. 4 loopback nodes, PHX_FT=1,
# idle, with a long delta (PHX_HB_TIMEOUT, default here 8000 ms); one job
# per victim: rank 0, the last rank (whose ring observer is rank 0, the one
# side of that pair that does not redial), a middle rank, and two pairs of
# ring neighbours killed together (1 and 2; the last rank and rank 0, across
# the ring's wrap-around). The kernel closes a killed process's sockets, so
# the observer learns within milliseconds that the rank's port refuses
# connections; of a pair, the second's refusal comes while it is not yet
# the survivor's emitter, and must still count once it is. Each kill must
# reach every survivor's notice within delta/2: the timeout path (silence
# for delta, 2 delta for a new emitter) cannot make that, whatever the
# load.
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
# all_noticed: every survivor logged a notice of every victim in $V.
all_noticed() {
    local v k; k=$(echo $V | wc -w)
    for v in $V; do [ "$(ev notice "\"dead\":$v,")" -ge $((N - k)) ] || return 1; done
}
within() { [ "$1" -ge 0 ] && [ "$1" -le "$2" ]; }
pid_of() { awk -v r="$1" '$1 == r { print $2 }' "$JOB/pids"; }

for V in 0 $((N - 1)) 1 "1 2" "$((N - 1)) 0"; do
    JOB=$TMP/v${V// /_}; mkdir -p "$JOB"
    # Idle (no spinners) and long: the job lasts until the test ends it.
    PHX_EVENTLOG="$JOB/ev.%r.jsonl" timeout -k 5 $(( 3 * DELTA_MS / 1000 + 60 )) \
        "$PHX" run -n $N --pidfile "$JOB/pids" "$BIN/busy" 600 50 0 >"$JOB/out" 2>"$JOB/err" &
    L=$!; PIDS="$PIDS $L"
    if ! poll_ms 30000 all_started; then
        fail "victim $V: all $N nodes log start"; kill "$L"; wait "$L"; continue
    fi
    : >"$JOB/kills.jsonl"
    pids=""; for v in $V; do pids="$pids $(pid_of "$v")"; done
    t=$(date +%s%N)
    # shellcheck disable=SC2086
    kill -KILL $pids
    set -- $pids
    for v in $V; do
        printf '{"t":%s,"ev":"kill","rank":%d,"pid":%d,"signal":"SIGKILL"}\n' "$t" "$v" "$1" >>"$JOB/kills.jsonl"
        shift
    done
    poll_ms $(( 5 * DELTA_MS )) all_noticed
    kill "$L" 2>/dev/null; wait "$L" 2>/dev/null
    # The latest of the victims' kill -> last survivor's notice.
    lat=$("$CHECK" -e "$JOB/ev.%r.jsonl" -k "$JOB/kills.jsonl" --json 2>/dev/null | python3 -c 'import json,sys
f = json.load(sys.stdin)["failures"]
l = [x["last"] for x in f]
ok = f and all(x and x["complete"] and x["latency_ms"] is not None for x in l)
print("%.0f" % max(x["latency_ms"] for x in l) if ok else "-1")')
    echo "# victim(s) $V: kill -> last survivor's notice ${lat} ms"
    check "victim $V: every survivor noticed the kill" all_noticed
    check "victim $V: within delta/2 = $((DELTA_MS / 2)) ms (${lat} ms): the closed port, not the timeout" \
        within "${lat:--1}" $((DELTA_MS / 2))
done
finish
