#!/bin/bash
# Replay speed: recovery of one kill, mlog-causal with recovery-helpers
# P = 1 against cr (the message-logging benchmark's part 3: jacobi on 8
# nodes x 2 workers, re-execution dominating), REPS rounds. Each round runs
# tools/bench/bench_mlog.sh's part 3 once, so its cr / mlog ratio is a
# same-run ratio; with a second build (BASE, e.g. the commit before a
# change) the rounds alternate between the two builds, so that the
# machine's other load hits both alike. Prints per build: the median of
# the rounds' ratios, cr's and mlog's recovery (ms, medians), and each
# round's figures.
# Usage: tools/bench/bench_replay.sh BUILD_DIR [BASE_BUILD_DIR] [REPS]
#   RARGS, K, W as for bench_mlog.sh part 3.
set -eu
NEW=${1:?usage: bench_replay.sh BUILD_DIR [BASE_BUILD_DIR] [REPS]}
BASE=${2:-}
REPS=${3:-5}
[ -x "$NEW/bin/jacobi" ] || { echo "bench_replay: no $NEW/bin/jacobi" >&2; exit 2; }
[ -z "$BASE" ] || [ -x "$BASE/bin/jacobi" ] || { echo "bench_replay: no $BASE/bin/jacobi" >&2; exit 2; }
D=$(dirname "$0")
T=$(mktemp -d /tmp/phx-bench-replay.XXXXXX)
trap 'rm -rf "$T"' EXIT
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "replay speed: mlog-causal P = 1 against cr, $REPS rounds ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%F))"
for r in $(seq "$REPS"); do
    for b in "$NEW" ${BASE:+"$BASE"}; do
        # One round of part 3: the table's cr and P=1 rows (recovery ms).
        PARTS=3 HS=1 "$D/bench_mlog.sh" "$b" 1 >"$T/out" 2>"$T/err" || true
        cr=$(awk -F'|' '$2 ~ /^ cr / { gsub(/ /, "", $4); print $4 }' "$T/out")
        ml=$(awk -F'|' '$2 ~ /mlog-causal P=1/ { gsub(/ /, "", $4); print $4 }' "$T/out")
        if [ -n "$cr" ] && [ -n "$ml" ] && [ "$ml" -gt 0 ]; then
            echo "$b $cr $ml" >>"$T/rows"
            echo "# round $r $b: cr $cr ms, mlog-causal $ml ms, $(awk -v a="$cr" -v b="$ml" 'BEGIN { printf "%.2f", a / b }')x"
        else
            echo "# round $r $b: left out (a run failed or checksums differ):" && sed 's/^/#   /' "$T/err" | tail -3
        fi
    done
done
echo
echo "| build | rounds | cr recovery, ms | mlog-causal P=1 recovery, ms | cr / mlog (median of rounds) |"
echo "|---|---|---|---|---|"
for b in "$NEW" ${BASE:+"$BASE"}; do
    n=$(awk -v b="$b" '$1 == b' "$T/rows" 2>/dev/null | wc -l)
    [ "$n" -gt 0 ] || { echo "| $b | 0 | - | - | - |"; continue; }
    echo "| $b | $n | $(awk -v b="$b" '$1 == b { print $2 }' "$T/rows" | median) | $(awk -v b="$b" '$1 == b { print $3 }' "$T/rows" | median) | $(awk -v b="$b" '$1 == b { print $2 / $3 }' "$T/rows" | median | xargs printf '%.2fx') |"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
