#!/bin/bash
# Message-logging benchmarks (issue 11), medians of REPS runs.
#  1. The determinant queue: ADD, PIGGYBACK and ACK latency (ns, median of
#     every operation of a run, then the median over runs) at T = 1, 2, 4, 8
#     producers, lock-free (ft/mlog/detq.c) against the same queue behind
#     one mutex (digest seed-004b-msglog.md R20, thesis Table 7.6), and
#     their ratio (mutex / lock-free: > 1 means lock-free is faster), and
#     per-worker lock-free queues (one per producer, what the runtime uses;
#     PIGGYBACK and ACK then sweep all T queues). The three run interleaved
#     so that the machine's other load hits all of them.
# Usage: tools/bench/bench_mlog.sh BUILD_DIR [REPS]
#   OPS=200000 operations per producer; TS="1 2 4 8".
set -eu
B=${1:-build}/bin
REPS=${2:-5}
OPS=${OPS:-200000}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2 }'; }
T=$(mktemp -d /tmp/phx-bench-mlog.XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "phalanx message-logging benchmark: $REPS runs each, medians ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%F))"
echo
echo "1. determinant queue, $OPS ADDs per producer (ns; ratio = mutex / lock-free)"
echo
printf '| T | op | shared lock-free | mutex | ratio | per-worker lock-free | ratio |\n'
printf '|---|---|---|---|---|---|---|\n'
for t in ${TS:-1 2 4 8}; do
    : >"$T/lf"; : >"$T/mx"; : >"$T/pw"
    for _ in $(seq "$REPS"); do
        "$B/bench_detq" lockfree "$t" "$OPS" >>"$T/lf"
        "$B/bench_detq" mutex "$t" "$OPS" >>"$T/mx"
        "$B/bench_detq" perworker "$t" "$OPS" >>"$T/pw"
    done
    for k in add piggyback ack; do
        a=$(field "${k}_ns" <"$T/lf" | median)
        b=$(field "${k}_ns" <"$T/mx" | median)
        c=$(field "${k}_ns" <"$T/pw" | median)
        r() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (a > 0) ? b / a : 0 }'; }
        echo "| $t | $k | $a | $b | $(r "$a" "$b") | $c | $(r "$c" "$b") |"
    done
done
