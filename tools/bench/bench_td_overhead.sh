#!/bin/bash
# Fault-free overhead of the adoption detectors (ft/termination/td_ds.h): wall time of
# the same refinement job under rellazy and releager against 4c, runs
# interleaved so drift hits all three alike; reports the median of the
# per-round ratios. Two nodes keep a 2-core box from oversubscribing.
# Usage: tools/bench/bench_td_overhead.sh BUILD_DIR [ROUNDS=11] [NODES=2]
set -eu
B=${1:-build}/bin
ROUNDS=${2:-11}
NODES=${3:-2}
out=$(mktemp)
trap 'rm -f "$out" "$out.job"' EXIT
for _ in $(seq "$ROUNDS"); do
    for td in 4c rellazy releager; do
        s=$(date +%s%N)
        PHX_TD=$td PHX_FT=0 "$B/phx" run -n "$NODES" "$B/tdk" --work 400 project 1e-9 >"$out.job" 2>&1
        e=$(date +%s%N)
        grep -q "tdk project" "$out.job" && echo "$td $(((e - s) / 1000))" >>"$out"
    done
done
python3 - "$out" "$ROUNDS" "$NODES" <<'PY'
import statistics as st, sys
d = {}
for line in open(sys.argv[1]):
    t, v = line.split()
    d.setdefault(t, []).append(int(v))
base = d["4c"]
print(f"adoption overhead: tdk --work 400 project 1e-9, {sys.argv[3]} nodes, {sys.argv[2]} interleaved rounds\n")
print("| detector | median wall (ms) | paired median vs 4c | goal |\n|---|---|---|---|")
print(f"| 4c | {st.median(base) / 1000:.1f} | baseline | |")
for t in ("rellazy", "releager"):
    r = [x / y for x, y in zip(d[t], base)]
    print(f"| {t} | {st.median(d[t]) / 1000:.1f} | {(st.median(r) - 1) * 100:+.2f} % | <= 1 % |")
PY
