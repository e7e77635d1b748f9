#!/bin/bash
# Checkpoint/restart benchmark (recovery=cr) on loopback, medians of REPS.
#  1. Checkpoint throughput: jacobi sized for S MiB of task state per node,
#     4 nodes; bytes per node / ckpt_commit ms, and all nodes' bytes / ms
#     (the aggregate: on one host the 4 nodes share its cores, as the one
#     raw-TCP pair does), beside memcpy and raw-TCP bandwidth measured in
#     the same run (the limit is the slower), and against the ring limit:
#     4 raw-TCP processes each sending to the next at once (rawtcp ring),
#     the checkpoint's own traffic pattern on the same cores. BASE=OTHER_BUILD_DIR runs that
#     build's jacobi in the same rounds, interleaved (before/after), and
#     in the CPU per GB figure too.
#  2. Restart time of one kill on 8 nodes, split from the event logs into
#     detection (kill -> last survivor's notice), agreement (-> first
#     rollback), state transfer (-> last restore) and re-execution (-> the
#     main task logs again the last iteration it logged before the kill),
#     for each RESTART_ON value (default: survivors spare respawn; respawn's
#     agreement includes the new process starting and connecting).
#  3. Forward-path overhead of periodic checkpoints against recovery=none
#     (ckpt-interval 1 s and 10 s): wall time and CPU time (user + sys of
#     all the job's processes), paired ratios within each round, medians;
#     the job runs about RUN3 seconds (default 45: four 10 s checkpoints);
#     and the scale estimate (one checkpoint's measured cost x checkpoints
#     per second).
# Usage: tools/bench/bench_ckpt.sh BUILD_DIR [REPS]
#   PARTS=1,3 runs only those parts (default 1,2,3); SIZES="1 8 32 128" the
#   state per node of part 1, in MiB (32 MiB per node = Charm++'s figure,
#   128 MiB over 4 processes).
set -eu
PARTS=${PARTS:-1,2,3}
part() { case ",$PARTS," in *",$1,"*) return 0 ;; esac; return 1; }
B=${1:-build}/bin
REPS=${2:-3}
T=$(mktemp -d /tmp/phx-bench-ckpt.XXXXXX)
trap 'rm -rf "$T"' EXIT
export PHX_WORKERS=${PHX_WORKERS:-2}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "phalanx checkpoint benchmark: $REPS runs each, medians ($(nproc) cores, $(date -u +%F))"

# ---- 1. throughput ---------------------------------------------------------
if part 1; then
memcpy_gbs=$(python3 -c '
import time
b = bytearray(256 << 20); c = bytearray(256 << 20); c[:] = b; best = 0
for _ in range(5):   # into memory already touched: memcpy, not page faults
    t = time.perf_counter(); c[:] = b; d = time.perf_counter() - t; best = max(best, len(b) / d / 1e9)
print("%.2f" % best)')
gbs() { awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^MiB_per_s=/) { split($i, a, "="); print a[2] * 1048576 / 1e9 } }'; }
tcp_gbs=$(for _ in $(seq "$REPS"); do "$B/rawtcp" bw 1000 2>/dev/null | gbs; done | median)
limit=$(awk -v a="$memcpy_gbs" -v b="$tcp_gbs" 'BEGIN { print (a < b) ? a : b }')
printf '\nmemcpy %s GB/s, raw TCP %s GB/s: limit %s GB/s\n\n' "$memcpy_gbs" "$tcp_gbs" "$limit"
printf '| state per node | build | ckpt ms (median) | GB/s per node | vs limit (median of rounds) | vs ring limit | GB/s, all 4 nodes | vs limit |\n|---|---|---|---|---|---|---|---|\n'
# tp BUILD_BIN N: one run, the steady state: every commit after epoch 2
# (epoch 1 holds no grid yet; epoch 2, the first with it, page-faults in
# fresh buffers, which later checkpoints reuse): "ms bytes"
tp() {
    rm -f "$T"/ev.*
    # A comm thread held by a first large serialisation must not be taken
    # for dead on a loaded host (a recovery would spoil the sample).
    PHX_HB_TIMEOUT=${HB1:-3000} "$1/phx" run -n 4 "$1/jacobi" --phx-ft=1 --phx-recovery=cr --phx-eventlog="$T/ev.%r.jsonl" \
        -N "$2" -i 12 -c 2 >/dev/null 2>&1
    python3 - "$T/ev.0.jsonl" <<'EOF'
import json, sys
c = [json.loads(l) for l in open(sys.argv[1]) if '"ckpt_commit"' in l]
for e in c[2:]:
    print(e["ms"], e["bytes"])
EOF
}
builds="$B${BASE:+ $BASE/bin}"
# The host's load changes by the minute: every round measures raw TCP
# again, and each commit is set against the limit of its own round.
for mib in ${SIZES:-1 8 32 128}; do
    # 4 nodes x V=4 blocks; N^2 * 8 bytes over 4 nodes = mib MiB each
    n=$(python3 -c "import math; print(int(math.sqrt($mib * 4 * 1048576 / 8)))")
    for _ in $(seq "$REPS"); do
        tcp=$("$B/rawtcp" bw 300 2>/dev/null | gbs)
        ring=$("$B/rawtcp" ring 4 300 2>/dev/null | gbs)
        lim=$(awk -v a="$memcpy_gbs" -v b="$tcp" 'BEGIN { print (a < b) ? a : b }')
        rlim=$(awk -v a="$memcpy_gbs" -v b="$ring" 'BEGIN { print (a < b) ? a : b }')
        for b in $builds; do tp "$b" "$n" | sed "s|^|$b $lim |; s|\$| $rlim|"; done
    done >"$T/tp"
    for b in $builds; do
        ms=$(awk -v b="$b" '$1 == b { print $3 }' "$T/tp" | median)
        by=$(awk -v b="$b" '$1 == b { print $4 }' "$T/tp" | median)
        gbs=$(awk -v b="$by" -v m="$ms" 'BEGIN { printf "%.3f", b / (m / 1000) / 1e9 }')
        r=$(awk -v b="$b" '$1 == b { print $4 / ($3 / 1000) / 1e9 / $2 }' "$T/tp" | median)
        rr=$(awk -v b="$b" '$1 == b { print $4 / ($3 / 1000) / 1e9 / $5 }' "$T/tp" | median)
        name=this; [ "$b" = "$B" ] || name=base
        printf '| %s MiB | %s | %s | %s | %.2fx | %.2fx | %.3f | %.2fx |\n' "$mib" "$name" "$ms" "$gbs" "$r" "$rr" \
            "$(awk -v g="$gbs" 'BEGIN { print 4 * g }')" "$(awk -v r="$r" 'BEGIN { print 4 * r }')"
        if [ "$mib" = 32 ] && [ "$b" = "$B" ]; then echo "$ms" >"$T/ms128"; fi
    done
    printf '|  | limits of this size'"'"'s rounds, pair / ring of 4 (GB/s): %s / %s |  |  |  |  |  |  |\n' \
        "$(awk '{ print $2 }' "$T/tp" | sort -u | tr '\n' ' ')" "$(awk '{ print $5 }' "$T/tp" | sort -u | tr '\n' ' ')"
done
if [ -s "$T/ms128" ]; then
    printf '\n128 MiB over 4 nodes (32 MiB each; Charm++: 0.41-1.83 s over TCP): %s ms (median)\n' "$(cat "$T/ms128")"
fi
# CPU cost, which the machine's other load does not inflate as it does wall
# time: CPU seconds of a run with a checkpoint every iteration minus one
# without, per GB checkpointed (4 nodes x 32 MiB, 7 more checkpoints), and
# the steady state: 16 checkpoints more (-i 24 against -i 8, each minus its
# run without), which reuse the buffers the first ones touched.
n=$(python3 -c "import math; print(int(math.sqrt(32 * 4 * 1048576 / 8)))")
for _ in $(seq "$REPS"); do
    for b in $builds; do
    printf '%s ' "$b"
    python3 - "$b" "$n" <<'EOF'
import resource, subprocess, sys
b, n = sys.argv[1], int(sys.argv[2])
def cpu(c, i):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([b + "/phx", "run", "-n", "4", b + "/jacobi", "--phx-ft=1", "--phx-recovery=cr",
                    "-N", str(n), "-i", str(i), "-c", str(c)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
gb = n * n * 8 / 1e9
a8, z8, a24, z24 = cpu(1, 8), cpu(0, 8), cpu(1, 24), cpu(0, 24)
print((a8 - z8) / (7 * gb), ((a24 - a8) - (z24 - z8)) / (16 * gb))
EOF
    done
done >"$T/cpu"
# The floor: raw TCP's CPU per GB moved (a pair, and the ring of 4).
for _ in $(seq "$REPS"); do
    python3 - "$B" <<'EOF'
import resource, subprocess, sys
def cpu(args, gb):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.argv[1] + "/rawtcp"] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / gb
print(cpu(["bw", "1000"], 1000 * 1048576 / 1e9), cpu(["ring", "4", "250"], 4 * 250 * 1048576 / 1e9))
EOF
done >"$T/rawcpu"
printf '\nraw TCP CPU per GB moved (median): pair %.2f s/GB, ring of 4 %.2f s/GB\n' \
    "$(awk '{ print $1 }' "$T/rawcpu" | median)" "$(awk '{ print $2 }' "$T/rawcpu" | median)"
for b in $builds; do
    name=this; [ "$b" = "$B" ] || name=base
    printf '\nCPU per GB checkpointed (32 MiB per node, median, %s): %.2f s/GB over the first 7, %.2f s/GB steady\n' \
        "$name" "$(awk -v b="$b" '$1 == b { print $2 }' "$T/cpu" | median)" \
        "$(awk -v b="$b" '$1 == b { print $3 }' "$T/cpu" | median)"
done

fi

# ---- 2. restart time ---------------------------------------------------------
if part 2; then
printf '\n| restart of one kill, 8 nodes, N=256 | detection | agreement | state transfer | re-execution |\n|---|---|---|---|---|\n'
for on in ${RESTART_ON:-survivors spare respawn}; do
sp=""; [ "$on" = spare ] && sp="--spares 1"
for _ in $(seq "$REPS"); do
    rm -f "$T"/ev.* "$T/pids"
    "$B/phx" run -n 8 $sp --pidfile "$T/pids" "$B/jacobi" --phx-ft=1 --phx-recovery=cr --phx-restart-on="$on" \
        --phx-eventlog="$T/ev.%r.jsonl" -N 256 -i 3000 -c 100 >/dev/null 2>&1 &
    job=$!
    until grep -qs '"iter":350}' "$T"/ev.*.jsonl; do sleep 0.02; done
    kt=$(date +%s%N)
    kill -9 "$(awk '$1 == 3 { print $2 }' "$T/pids")"
    wait "$job" || true
    python3 - "$kt" "$T" <<'EOF'
import glob, json, sys
kill = int(sys.argv[1]); ev = []
for f in glob.glob(sys.argv[2] + "/ev.*.jsonl"):
    ev += [json.loads(l) for l in open(f)]
t = lambda name: [e["t"] for e in ev if e["ev"] == name and e["t"] > kill]
notice, rb, rs, done = max(t("notice")), min(t("rollback")), max(t("restore")), max(t("recovery_done"))
before = max(e["iter"] for e in ev if e["ev"] == "jacobi_iter" and e["t"] < kill)
# progress passes the pre-kill point again (the first iteration after it
# when the rollback landed exactly there)
again = min(e["t"] for e in ev if e["ev"] == "jacobi_iter" and e["t"] > done and e["iter"] >= before)
print((notice - kill) / 1e6, (rb - notice) / 1e6, (max(rs, done) - rb) / 1e6, (again - done) / 1e6)
EOF
done >"$T/rs"
printf '| ms (median), restart-on=%s | %s | %s | %s | %s |\n' "$on" "$(awk '{print $1}' "$T/rs" | median)" \
    "$(awk '{print $2}' "$T/rs" | median)" "$(awk '{print $3}' "$T/rs" | median)" "$(awk '{print $4}' "$T/rs" | median)"
done

fi

# ---- 3. forward-path overhead --------------------------------------------------
if part 3; then
# Rounds of three runs in rotating order (none, cr at 10 s, cr at 1 s), each
# sized to about RUN3 seconds (default 45: four 10 s intervals). Per run:
# wall time of the whole job (phx run, start to exit) and CPU time (user +
# sys of every process of the job: phx run's waited-for descendants). Each
# cr run is set against the none run of its own round (paired ratio); the
# table shows the medians of those ratios. td=none in all three (jacobi ends
# by phx_exit): the difference is the checkpoints alone.
# Also the scale estimate: the cost of one checkpoint measured directly
# (CPU: (cr 1 s - none) / checkpoints of the cr 1 s run; wall: the median
# ckpt_commit ms, the time the workers stand paused) times checkpoints per
# second at 10 s, over the none run's CPU per second and wall time.
n3=${N3:-2048}
# jt EVDIR ARGS...: "wall_s cpu_s checkpoints commit_ms_median" of one job.
jt() {
    local ev=$1; shift
    rm -rf "$ev"; mkdir -p "$ev"
    PHX_HB_TIMEOUT=${HB1:-3000} python3 - "$B" "$n3" "$ev" "$@" <<'EOF2'
import glob, json, resource, statistics, subprocess, sys, time
b, n, ev, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
r0 = resource.getrusage(resource.RUSAGE_CHILDREN); t0 = time.monotonic()
p = subprocess.run([b + "/phx", "run", "-n", "4", b + "/jacobi", "--phx-ft=1", "--phx-td=none",
                    "--phx-eventlog=" + ev + "/ev.%r.jsonl"] + args + ["-N", n],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
wall = time.monotonic() - t0; r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
ms = [json.loads(l)["ms"] for l in open(ev + "/ev.0.jsonl") if '"ckpt_commit"' in l] if glob.glob(ev + "/ev.0.jsonl") else []
# epoch 1 (job start, no grid yet) is not a periodic checkpoint
ms = ms[1:]
print("%.3f %.3f %d %.3f %d" % (wall, cpu, len(ms), statistics.median(ms) if ms else 0, p.returncode))
EOF2
}
t100=$(jt "$T/ev3" --phx-recovery=none -i 100 | awk '{ print $1 }')
it3=$(awk -v t="$t100" -v r="${RUN3:-45}" 'BEGIN { i = int(100 * r / t); print (i < 100) ? 100 : i }')
printf '\n| jacobi 4 nodes, N=%s, %s iterations (~%s s) | none | cr, 10 s | cr, 1 s |\n|---|---|---|---|\n' "$n3" "$it3" "${RUN3:-45}"
k=0
for _ in $(seq "$REPS"); do
    declare -A res=()
    for m in $(case $((k % 3)) in 0) echo none c10 c1 ;; 1) echo c10 c1 none ;; *) echo c1 none c10 ;; esac); do
        case $m in
        none) res[$m]=$(jt "$T/ev3" --phx-recovery=none -i "$it3") ;;
        c10) res[$m]=$(jt "$T/ev3" --phx-recovery=cr --phx-ckpt-interval=10 -i "$it3") ;;
        c1) res[$m]=$(jt "$T/ev3" --phx-recovery=cr --phx-ckpt-interval=1 -i "$it3") ;;
        esac
    done
    k=$((k + 1))
    echo "${res[none]} ${res[c10]} ${res[c1]}"
done >"$T/ov"
# columns: 1-5 none, 6-10 cr 10 s, 11-15 cr 1 s (wall cpu ckpts commit_ms rc)
bad=$(awk '$5 != 0 || $10 != 0 || $15 != 0' "$T/ov" | wc -l)
[ "$bad" = 0 ] || echo "WARNING: $bad rounds had a job exit non-zero (see pairs below)"
pct() { awk "{ print (\$$1 / \$$2 - 1) * 100 }" "$T/ov" | median; }
printf '| wall s (median) | %s | %s | %s |\n' "$(awk '{print $1}' "$T/ov" | median)" \
    "$(awk '{print $6}' "$T/ov" | median)" "$(awk '{print $11}' "$T/ov" | median)"
printf '| CPU s (median) | %s | %s | %s |\n' "$(awk '{print $2}' "$T/ov" | median)" \
    "$(awk '{print $7}' "$T/ov" | median)" "$(awk '{print $12}' "$T/ov" | median)"
printf '| checkpoints per run (median) | 0 | %s | %s |\n' "$(awk '{print $8}' "$T/ov" | median)" "$(awk '{print $13}' "$T/ov" | median)"
printf '| wall overhead, paired median | | %+.2f %% | %+.2f %% |\n' "$(pct 6 1)" "$(pct 11 1)"
printf '| CPU overhead, paired median | | %+.2f %% | %+.2f %% |\n' "$(pct 7 2)" "$(pct 12 2)"
# Scale: per-checkpoint cost from the 1 s runs, at one checkpoint per 10 s.
cpu_ck=$(awk '$13 > 0 { print ($12 - $2) / $13 }' "$T/ov" | median)
pause_ms=$(awk '{ print $14 }' "$T/ov" | median)
printf '| scale estimate at 10 s: CPU per checkpoint %.3f s, pause %.1f ms | | CPU %+.2f %%, wall %+.2f %% | |\n' \
    "$cpu_ck" "$pause_ms" \
    "$(awk -v c="$cpu_ck" '{ print c / 10 / ($2 / $1) * 100 }' "$T/ov" | median)" \
    "$(awk -v p="$pause_ms" 'BEGIN { print p / 10000 * 100 }')"
c10=$(awk '{print $8}' "$T/ov" | median)
awk -v c="$c10" 'BEGIN { exit !(c < 3) }' &&
    echo "WARNING: the cr 10 s runs made $c10 periodic checkpoints (median), fewer than 3: the runs were shorter than sized (RUN3, load); the scale estimate is the figure to use"
printf 'rounds (none | cr 10 s | cr 1 s: wall s, CPU s, checkpoints, commit ms, rc):\n'
sed 's/^/  /' "$T/ov"
fi
