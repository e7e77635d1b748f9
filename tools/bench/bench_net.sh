#!/bin/bash
# Transport figures with their CPU cost: message rate, bandwidth and round
# trips of Phalanx against raw TCP (tools/bench/rawtcp.c), and optionally
# against an older Phalanx build, all interleaved run by run so that a
# loaded machine weighs on every side alike. Medians of REPS runs.
#
# CPU is user + sys of the whole job (every node and the launcher, from
# /usr/bin/time; startup included, about 0.01 s): per message for rates,
# per GB for bandwidth, per round trip for latency. On a shared machine the
# CPU figures are the steady ones; wall-clock rates follow the load.
#
# Usage: tools/bench/bench_net.sh BUILD_DIR [REPS=5] [OLD_BUILD_DIR]
#   env: RATE_N (2000000), BW_N (1000 x 1 MiB), BW64_N (8000 x 64 KiB), LAT_N (20000)
set -eu
B=${1:-build}/bin
REPS=${2:-5}
OLD=${3:+$3/bin}
RATE_N=${RATE_N:-2000000}
BW_N=${BW_N:-1000}
BW64_N=${BW64_N:-8000}
LAT_N=${LAT_N:-20000}
export PHX_TD=none   # the transport, not termination detection
T=$(mktemp -d "${TMPDIR:-/tmp}/bench_net.XXXXXX")
trap 'rm -rf "$T"' EXIT

fig() { awk -v k="$1" '{ for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) { split($i, a, "="); print a[2] } }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
range() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }

# one NAME KEY CMD...: one run; appends figure KEY to $T/NAME.fig, its
# CPU seconds to $T/NAME.cpu, and p10/p90 (latency runs) to $T/NAME.p10/.p90
one() {
    name=$1 key=$2; shift 2
    out=$(/usr/bin/time -o "$T/time" -f "%U %S" "$@" 2>/dev/null) || { echo "bench_net: $name failed" >&2; return 0; }
    echo "$out" | fig "$key" | head -1 >>"$T/$name.fig"
    echo "$out" | fig p10_us | head -1 >>"$T/$name.p10"
    echo "$out" | fig p90_us | head -1 >>"$T/$name.p90"
    awk '{ print $1 + $2 }' "$T/time" >>"$T/$name.cpu"
}
med() { median <"$T/$1.$2"; }

load() { cut -d' ' -f1-3 /proc/loadavg; }

echo "phalanx transport, CPU per operation: $REPS runs each, interleaved, medians ($(nproc) cores, $(date -u +%F))"
echo "load average at start: $(load)"
for _ in $(seq "$REPS"); do
    for side in new ${OLD:+old}; do
        d=$B; [ "$side" = old ] && d=$OLD
        one "rate.$side" msgs_per_s "$d/phx" run -n 2 "$d/pingpong" rate "$RATE_N"
        one "bw.$side" MiB_per_s "$d/phx" run -n 2 "$d/pingpong" bw "$BW_N" 1048576
        one "bw64.$side" MiB_per_s "$d/phx" run -n 2 "$d/pingpong" bw "$BW64_N" 65536
        one "lat.$side" median_us "$d/phx" run -n 2 "$d/pingpong" lat "$LAT_N"
    done
    one spin.inline median_us "$B/phx" run -n 2 --phx-workers=0 --phx-busy-poll "$B/pingpong" lat "$LAT_N"
    one spin.threads median_us "$B/phx" run -n 2 --phx-busy-poll "$B/pingpong" lat "$LAT_N"
    one rate.raw msgs_per_s "$B/rawtcp" rate "$RATE_N"
    one bw.raw MiB_per_s "$B/rawtcp" bw "$BW_N" 1048576
    one bw64.raw MiB_per_s "$B/rawtcp" bw "$BW64_N" 65536
    one lat.raw median_us "$B/rawtcp" lat "$LAT_N"
    one spin.raw median_us "$B/rawtcp" lat --spin "$LAT_N"
done
echo "load average at end: $(load)"

# paired A B: the median over rounds of A's figure over B's, taken in the
# same round (the host's load moves both alike; a ratio of medians can pair
# a quiet minute of one with a busy one of the other).
paired() { paste "$T/$1.fig" "$T/$2.fig" | awk '$1 > 0 && $2 > 0 { print $1 / $2 }' | median | awk '{ printf "%.2f", $1 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }'; }
ns_per() { awk -v c="$1" -v n="$2" 'BEGIN { printf "%.0f", c * 1e9 / n }'; }
s_per_gb() { awk -v c="$1" -v n="$2" -v s="$3" 'BEGIN { printf "%.3f", c / (n * s / 1e9) }'; }
us_per() { awk -v c="$1" -v n="$2" 'BEGIN { printf "%.2f", c * 1e6 / n }'; }

printf '\n| figure | run | median | CPU (both sides) | vs raw TCP |\n|---|---|---|---|---|\n'
rate_row() {   # rate_row SIDE LABEL
    printf '| 8 B one-way rate (msg/s) | %s | %s | %s ns/msg | %sx |\n' "$2" "$(med "rate.$1" fig)" \
        "$(ns_per "$(med "rate.$1" cpu)" "$RATE_N")" "$(ratio "$(med "rate.$1" fig)" "$(med rate.raw fig)")"
}
bw_row() {   # bw_row NAME SIZE LABEL SIDE N
    printf '| %s bandwidth (MiB/s) | %s | %s | %s s/GB | %sx |\n' "$3" "$4" "$(med "$1.$4" fig)" \
        "$(s_per_gb "$(med "$1.$4" cpu)" "$5" "$2")" "$(ratio "$(med "$1.$4" fig)" "$(med "$1.raw" fig)")"
}
lat_row() {   # lat_row NAME LABEL SIDE RAW
    printf '| 8 B round trip, %s (us) | %s | %s (run medians %s; p10-p90 %s-%s) | %s us/rt | %sx |\n' "$2" "$3" \
        "$(med "$1" fig)" "$(range <"$T/$1.fig")" "$(med "$1" p10)" "$(med "$1" p90)" \
        "$(us_per "$(med "$1" cpu)" "$LAT_N")" "$(ratio "$(med "$1" fig)" "$(med "$4" fig)")"
}
rate_row new phalanx
[ -n "$OLD" ] && rate_row old old
printf '| 8 B one-way rate (msg/s) | raw TCP | %s | %s ns/msg | 1.00x |\n' "$(med rate.raw fig)" \
    "$(ns_per "$(med rate.raw cpu)" "$RATE_N")"
for s in new ${OLD:+old} raw; do bw_row bw 1048576 "1 MiB" "$s" "$BW_N"; done
for s in new ${OLD:+old} raw; do bw_row bw64 65536 "64 KiB" "$s" "$BW64_N"; done
lat_row spin.inline "spinning, inline (workers=0)" phalanx spin.raw
lat_row spin.threads "spinning, threads" phalanx spin.raw
lat_row spin.raw "spinning" "raw TCP" spin.raw
lat_row lat.new default phalanx lat.raw
[ -n "$OLD" ] && lat_row lat.old default old lat.raw
lat_row lat.raw "blocking" "raw TCP" lat.raw
printf '\nsame-round ratios, median over rounds: spinning round trip inline / raw %sx, threads / raw %sx; ' \
    "$(paired spin.inline spin.raw)" "$(paired spin.threads spin.raw)"
printf 'bandwidth / raw: 1 MiB %sx, 64 KiB %sx\n' "$(paired bw.new bw.raw)" "$(paired bw64.new bw64.raw)"
if [ -n "$OLD" ]; then
    printf 'against %s, same rounds: rate %sx, CPU per message %sx; 1 MiB bandwidth %sx; default round trip %sx\n' \
        "$OLD" "$(paired rate.new rate.old)" "$(ratio "$(med rate.new cpu)" "$(med rate.old cpu)")" \
        "$(paired bw.new bw.old)" "$(paired lat.new lat.old)"
fi
