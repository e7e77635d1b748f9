#!/bin/bash
# Transport benchmark: Phalanx against the project's raw-TCP baseline,
# measured in the same run, REPS times each; medians and their ratios.
# Beside each rate, the CPU it cost: user + sys of the whole run (every
# process, both sides, startup included) per message, and per GB (10^9
# bytes) moved; medians over the runs. The round trips are given with their
# spread (min / median / max of the runs' medians): the blocking baseline
# swings by 2x between runs on a loaded machine, so one ratio means little.
# Usage: tools/bench/bench.sh BUILD_DIR [REPS]     (./build.sh bench)
set -eu
B=${1:-build}/bin
REPS=${2:-5}
export PHX_TD=none   # measure the transport, not termination detection
T=$(mktemp -d "${TMPDIR:-/tmp}/phx-bench.XXXXXX")
trap 'rm -rf "$T"' EXIT

fig() { awk -v k="$1" '{ for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) { split($i, a, "="); print a[2] } }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# sample NAME KEY CMD...: REPS runs; $T/NAME gets one line per run:
# "figure cpu_seconds n size" (n and size from the program's output).
sample() {
    name=$1 key=$2; shift 2
    : >"$T/$name"
    for _ in $(seq "$REPS"); do
        out=$(/usr/bin/time -f "%U %S" -o "$T/cpu" "$@" 2>/dev/null | tail -1)
        cpu=$(awk '{ print $1 + $2 }' "$T/cpu")
        echo "$(echo "$out" | fig "$key") $cpu $(echo "$out" | fig n) $(echo "$out" | fig size)" >>"$T/$name"
    done
}
med() { awk '{ print $1 }' "$T/$1" | median; }                         # figure
spread() { awk '{ print $1 }' "$T/$1" | sort -g | awk '{ v[NR] = $1 } END { printf "%s / %s / %s", v[1], (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[NR] }'; }
ns_per_msg() { awk '$3 > 0 { print $2 / $3 * 1e9 }' "$T/$1" | median; }  # CPU ns per message
s_per_gb() { awk '$3 > 0 && $4 > 0 { print $2 / ($3 * $4 / 1e9) }' "$T/$1" | median; }

echo "phalanx transport benchmark: $REPS runs each, medians ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F))"
sample raw_lat median_us "$B/rawtcp" lat 20000
sample raw_spin median_us "$B/rawtcp" lat --spin 20000
sample raw_rate msgs_per_s "$B/rawtcp" rate 2000000
sample raw_bw MiB_per_s "$B/rawtcp" bw 1000
sample raw_bw64 MiB_per_s "$B/rawtcp" bw 16000 65536
sample phx_lat median_us "$B/phx" run -n 2 "$B/pingpong" lat 20000
PHX_BUSY_POLL=1 sample phx_spin median_us "$B/phx" run -n 2 "$B/pingpong" lat 20000
sample phx_rate msgs_per_s "$B/phx" run -n 2 "$B/pingpong" rate 2000000
sample phx_bw MiB_per_s "$B/phx" run -n 2 "$B/pingpong" bw 1000
sample phx_bw64 MiB_per_s "$B/phx" run -n 2 "$B/pingpong" bw 16000 65536

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }'; }
r() { ratio "$(med "$1")" "$(med "$2")"; }
printf '\n| figure | phalanx | raw TCP | ratio | goal |\n|---|---|---|---|---|\n'
printf '| 8 B round trip, default (us) | %s | %s (blocking) | %sx | no slower than before |\n' "$(med phx_lat)" "$(med raw_lat)" "$(r phx_lat raw_lat)"
printf '| 8 B round trip, busy-poll (us) | %s | %s (spinning) | %sx | <= 1.3x |\n' "$(med phx_spin)" "$(med raw_spin)" "$(r phx_spin raw_spin)"
printf '| 8 B one-way rate (msg/s) | %s | %s (write per msg) | %sx | >= 10,000,000 msg/s |\n' "$(med phx_rate)" "$(med raw_rate)" "$(r phx_rate raw_rate)"
printf '| 8 B one-way rate: CPU per message, both sides (ns) | %.0f | %.0f | %sx | <= 200 ns |\n' "$(ns_per_msg phx_rate)" "$(ns_per_msg raw_rate)" "$(ratio "$(ns_per_msg phx_rate)" "$(ns_per_msg raw_rate)")"
printf '| 1 MiB bandwidth (MiB/s) | %s | %s | %sx | >= 0.95x |\n' "$(med phx_bw)" "$(med raw_bw)" "$(r phx_bw raw_bw)"
printf '| 1 MiB bandwidth: CPU per GB moved, both sides (s/GB) | %.3f | %.3f | %sx | |\n' "$(s_per_gb phx_bw)" "$(s_per_gb raw_bw)" "$(ratio "$(s_per_gb phx_bw)" "$(s_per_gb raw_bw)")"
printf '| 64 KiB bandwidth (MiB/s) | %s | %s | %sx | >= 0.95x |\n' "$(med phx_bw64)" "$(med raw_bw64)" "$(r phx_bw64 raw_bw64)"
printf '| 64 KiB bandwidth: CPU per GB moved, both sides (s/GB) | %.3f | %.3f | %sx | |\n' "$(s_per_gb phx_bw64)" "$(s_per_gb raw_bw64)" "$(ratio "$(s_per_gb phx_bw64)" "$(s_per_gb raw_bw64)")"
printf '\nround trips, min / median / max of the %s runs'"'"' medians (us):\n\n' "$REPS"
printf '| figure | phalanx | raw TCP |\n|---|---|---|\n'
printf '| 8 B round trip, default vs blocking | %s | %s |\n' "$(spread phx_lat)" "$(spread raw_lat)"
printf '| 8 B round trip, busy-poll vs spinning | %s | %s |\n' "$(spread phx_spin)" "$(spread raw_spin)"
echo
echo "CPU per op includes each run's startup (phx run: launch and handshakes, a few ms)."
