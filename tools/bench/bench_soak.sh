#!/bin/bash
# Oversubscribed soak: no false suspicion while every core is saturated.
# Runs `busy` (every worker of every node spinning 10 ms chunks) on N nodes
# with fault tolerance on and no failure injected, for SECS seconds, then
# counts from the event logs what a false suspicion leaves behind: a
# "suspect" (a detector declared a live emitter), a "notice" of any rank,
# a "fenced" node; and the heartbeat stalls the detectors forgave (each
# node's count from its closing statistics line, the longest from the
# "not running for ... ms" warnings, which are rate-limited). Every node is alive
# all along, so any suspicion, notice or fence is false. Stalls are not
# errors: they are the load the detector had to ride out.
#
# Usage: tools/bench/bench_soak.sh BUILD_DIR [SECS=60]
# Env:   SIZES="8 16" (nodes per run, default 8 and 16 on this machine's
#        cores: 4 and 8 nodes per core with 2 threads each), PHX_WORKERS
#        (default 1), PHX_HB_TIMEOUT (delta ms, default 1000).
# Exit: 0 when no false suspicion was seen, 1 otherwise.
set -u
B=${1:?usage: bench_soak.sh BUILD_DIR [SECS]}/bin
SECS=${2:-60}
SIZES=${SIZES:-8 16}
export PHX_WORKERS=${PHX_WORKERS:-1}
T=$(mktemp -d /tmp/phx-bench-soak.XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "phalanx oversubscribed soak: ${SECS} s of busy per size, $(nproc) cores, delta ${PHX_HB_TIMEOUT:-1000} ms, $PHX_WORKERS worker(s) per node ($(date -u +%F))"
printf '\n| nodes | nodes per core | rc | false suspicions | notices | fenced | stalls forgiven | longest stall ms |\n|---|---|---|---|---|---|---|---|\n'
bad=0
for n in $SIZES; do
    rm -f "$T"/ev.*
    # --oversubscribe: more nodes than cores is the point here.
    PHX_LOG=info PHX_EVENTLOG="$T/ev.%r.jsonl" "$B/phx" run -n "$n" --oversubscribe "$B/busy" "$SECS" 10 \
        --phx-ft=1 >"$T/out" 2>"$T/err"
    rc=$?
    cnt() { cat "$T"/ev.*.jsonl 2>/dev/null | grep -c "\"ev\":\"$1\""; }
    sus=$(cnt suspect) not=$(cnt notice) fen=$(cnt fenced)
    stalls=$(sed -n 's/.*heartbeats sent.*; stalls \([0-9]*\);.*/\1/p' "$T/err" | awk '{ s += $1 } END { print s + 0 }')
    longest=$(sed -n 's/.*not running for \([0-9]*\) ms.*/\1/p' "$T/err" | sort -n | tail -1)
    printf '| %d | %s | %d | %d | %d | %d | %d | %s |\n' "$n" "$(awk -v a="$n" -v b="$(nproc)" 'BEGIN { print a / b }')" \
        "$rc" "$sus" "$not" "$fen" "$stalls" "${longest:--}"
    [ "$rc" = 0 ] && [ "$sus" = 0 ] && [ "$not" = 0 ] && [ "$fen" = 0 ] || bad=1
done
[ "$bad" = 0 ] && echo "no false suspicion" || echo "FALSE SUSPICIONS (see the table)"
exit "$bad"
