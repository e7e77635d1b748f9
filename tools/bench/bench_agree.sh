#!/bin/bash
# Agreement benchmark: fault-tolerant agreement (ERA, phx_agree) against the
# runtime's plain allreduce (phx_allreduce), measured alternately in the same
# job on n = 2, 4, 8, 16 loopback nodes, REPS jobs each; medians of the
# per-job medians (rank 0's view). Then the first agreement after one
# failure (notice already in, so the tree is mended but not the detector's
# time) at n = 8.
# Usage: tools/bench/bench_agree.sh BUILD_DIR [REPS] [ITERS]
set -eu
B=${1:-build}/bin
REPS=${2:-3}
ITERS=${3:-300}
export PHX_TD=none        # the job ends by phx_exit
HB=${PHX_HB_TIMEOUT:-500}
# Bound per job: startup plus ITERS pairs of collectives; generous on a
# shared box, and a failure adds a few delta.
TO=$((30 + 20 * HB / 1000))

fig() { awk -v k="$1" '{ for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) { split($i, a, "="); print a[2] } }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

echo "phalanx agreement benchmark: $REPS jobs x $ITERS iterations each, medians ($(nproc) cores, $(date -u +%F))"
printf '\n| nodes | agree (us) | allreduce (us) | ratio | goal |\n|---|---|---|---|---|\n'
for n in 2 4 8 16; do
    out=$(for _ in $(seq "$REPS"); do
        PHX_FT=1 PHX_HB_TIMEOUT=$HB timeout -k 5 "$TO" "$B/phx" run -n "$n" "$B/agree" -k 0 --bench "$ITERS" 2>/dev/null |
            grep '^\[0\] bench ' || true
    done)
    a=$(echo "$out" | fig agree_us | median)
    r=$(echo "$out" | fig allreduce_us | median)
    printf '| %d | %s | %s | %sx | <= 1.3x |\n' "$n" "$a" "$r" "$(ratio "$a" "$r")"
done

printf '\n| n = 8, rank 5 killed | first agreement after the notice (us) | next agreement (us) |\n|---|---|---|\n'
out=$(for _ in $(seq "$REPS"); do
    PHX_FT=1 PHX_HB_TIMEOUT=$HB timeout -k 5 "$TO" "$B/phx" run -n 8 "$B/agree" -k 0 --bench 50 --bench-fail 5 2>/dev/null |
        grep '^\[0\] bench_fail ' || true
done)
printf '| median of %d jobs | %s | %s |\n' "$REPS" "$(echo "$out" | fig first_us | median)" "$(echo "$out" | fig next_us | median)"
