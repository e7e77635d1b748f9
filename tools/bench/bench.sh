#!/bin/bash
# Transport benchmark: Phalanx against the project's raw-TCP baseline,
# measured in the same run, REPS times each; medians and their ratios.
# Usage: tools/bench/bench.sh BUILD_DIR [REPS]     (./build.sh bench)
set -eu
B=${1:-build}/bin
REPS=${2:-5}
export PHX_TD=none   # measure the transport, not termination detection

fig() { awk -v k="$1" '{ for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) { split($i, a, "="); print a[2] } }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

run() {   # run KEY CMD... : REPS samples of figure KEY, median
    key=$1; shift
    for _ in $(seq "$REPS"); do "$@" 2>/dev/null | fig "$key"; done | median
}

echo "phalanx transport benchmark: $REPS runs each, medians ($(nproc) cores, $(date -u +%F))"
raw_lat=$(run median_us "$B/rawtcp" lat 20000)
raw_spin=$(run median_us "$B/rawtcp" lat --spin 20000)
raw_rate=$(run msgs_per_s "$B/rawtcp" rate 2000000)
raw_bw=$(run MiB_per_s "$B/rawtcp" bw 1000)
phx_lat=$(run median_us "$B/phx" run -n 2 "$B/pingpong" lat 20000)
phx_spin=$(PHX_BUSY_POLL=1 run median_us "$B/phx" run -n 2 "$B/pingpong" lat 20000)
phx_rate=$(run msgs_per_s "$B/phx" run -n 2 "$B/pingpong" rate 2000000)
phx_bw=$(run MiB_per_s "$B/phx" run -n 2 "$B/pingpong" bw 1000)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf '\n| figure | phalanx | raw TCP | ratio | goal |\n|---|---|---|---|---|\n'
printf '| 8 B round trip, default (us) | %s | %s (blocking) | %sx | <= 1.5x |\n' "$phx_lat" "$raw_lat" "$(ratio "$phx_lat" "$raw_lat")"
printf '| 8 B round trip, busy-poll (us) | %s | %s (spinning) | %sx | <= 1.5x |\n' "$phx_spin" "$raw_spin" "$(ratio "$phx_spin" "$raw_spin")"
printf '| 8 B one-way rate (msg/s) | %s | %s (write per msg) | %sx | >= 5,000,000 msg/s |\n' "$phx_rate" "$raw_rate" "$(ratio "$phx_rate" "$raw_rate")"
printf '| 1 MiB bandwidth (MiB/s) | %s | %s | %sx | >= 0.8x |\n' "$phx_bw" "$raw_bw" "$(ratio "$phx_bw" "$raw_bw")"
