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
#  2. Forward-path overhead on jacobi (4 nodes x 2 workers, a checkpoint
#     every C iterations): recovery=none, cr, mlog-causal and
#     mlog-pessimistic, in interleaved rounds; per round the ratio of each
#     mode's CPU time (user + sys of every node, the figure the machine's
#     other load disturbs least) to none's and to cr's of the same round;
#     medians of the ratios; jacobi's own wall clock beside it. Plus the thesis's Table 3.1
#     figures from the nodes' mlog_stats events: dets per remote message,
#     det copies sent per det, trailer bytes per remote message.
#  3. Recovery cost of one kill, mlog-causal against cr: jacobi on 8 nodes
#     x 2 workers, V = 8 blocks per node, rank 3 SIGKILLed once iteration
#     K is logged; per round the time lost = (jacobi's ms with the kill) -
#     (without), for each mode, interleaved; medians and their ratio. Split
#     from the main task's progress into the window around the kill
#     (iterations K-50 to K+W: detection, restore, replay or redo) and the
#     rest of the run after it; and the CPU lost (user + sys of all nodes).
#     Stall: from the first failure notice to the first iteration the job
#     had not completed before it (the recovery itself, free of the
#     run-to-run spread of whole runs on a loaded machine).
# Usage: tools/bench/bench_mlog.sh BUILD_DIR [REPS]
#   PARTS=1,2,3 (default all); OPS=200000 operations per producer; TS="1 2 4 8";
#   JARGS="-N 512 -i 400 -c 50" jacobi's arguments for part 2; part 3:
#   RARGS="-N 512 -i 1200 -c 100 -V 8", K=350, W=150.
set -eu
PARTS=${PARTS:-1,2,3}
part() { case ",$PARTS," in *",$1,"*) return 0 ;; esac; return 1; }
B=${1:-build}/bin
REPS=${2:-5}
OPS=${OPS:-200000}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2 }'; }
T=$(mktemp -d /tmp/phx-bench-mlog.XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "phalanx message-logging benchmark: $REPS runs each, medians ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $(date -u +%F))"
if part 1; then
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
fi

if part 2; then
JARGS=${JARGS:-"-N 512 -i 400 -c 50"}
echo
echo "2. forward-path overhead, jacobi $JARGS on 4 nodes x 2 workers (time = jacobi's ms; ratios per round, medians)"
echo
: >"$T/ratios"
for r in $(seq "$REPS"); do
    line=""
    for m in none cr mlog-causal mlog-pessimistic; do
        rm -f "$T"/ev.*
        ft="--phx-ft=1"
        out=$(PHX_WORKERS=2 /usr/bin/time -f "cpu %U %S" -o "$T/cpu" "$B/phx" run -n 4 "$B/jacobi" $ft \
            --phx-recovery=$m --phx-eventlog="$T/ev.%r.jsonl" $JARGS 2>/dev/null | tail -1)
        ms=$(echo "$out" | sed -n 's/.*(\([0-9.]*\) ms).*/\1/p')
        cpu=$(awk '$1 == "cpu" { print $2 + $3 }' "$T/cpu")
        line="$line $m=$cpu ms_$m=$ms"
        if [ "$m" = mlog-causal ] || [ "$m" = mlog-pessimistic ]; then
            cat "$T"/ev.*.jsonl | python3 -c '
import json, sys
t = {"dets": 0, "logged": 0, "dets_pb": 0, "pb_bytes": 0}
for l in sys.stdin:
    e = json.loads(l)
    if e["ev"] == "mlog_stats":
        for k in t: t[k] += e[k]
print(sys.argv[1], t["dets"] / max(t["logged"], 1), t["dets_pb"] / max(t["dets"], 1), t["pb_bytes"] / max(t["logged"], 1))' "$m" >>"$T/t31"
        fi
    done
    echo "$line" >>"$T/ratios"
done
get() { tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2 }'; }
printf '| mode | CPU s (median) | wall ms (median) | CPU / none (median of rounds) | CPU / cr (median of rounds) |\n|---|---|---|---|---|\n'
for m in none cr mlog-causal mlog-pessimistic; do
    cpu=$(get "$m" <"$T/ratios" | median)
    ms=$(get "ms_$m" <"$T/ratios" | median)
    rn=$(while read -r l; do a=$(echo "$l" | get "$m"); b=$(echo "$l" | get none); awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) print a / b }'; done <"$T/ratios" | median)
    rc=$(while read -r l; do a=$(echo "$l" | get "$m"); b=$(echo "$l" | get cr); awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) print a / b }'; done <"$T/ratios" | median)
    echo "| $m | $cpu | $ms | $rn | $rc |"
done
echo
printf '| mode | dets per remote message | det copies sent per det | trailer bytes per remote message |\n|---|---|---|---|\n'
for m in mlog-causal mlog-pessimistic; do
    a=$(awk -v m="$m" '$1 == m { print $2 }' "$T/t31" | median)
    b=$(awk -v m="$m" '$1 == m { print $3 }' "$T/t31" | median)
    c=$(awk -v m="$m" '$1 == m { print $4 }' "$T/t31" | median)
    printf '| %s | %.2f | %.2f | %.1f |\n' "$m" "$a" "$b" "$c"
done
fi

if part 3; then
RARGS=${RARGS:-"-N 512 -i 1200 -c 100 -V 8"}
K=${K:-350}
echo
echo "3. recovery cost of one kill (rank 3 at iteration $K), jacobi $RARGS on 8 nodes x 2 workers"
echo
jrun() {   # jrun MODE KILL: prints "ms cpu window_ms after_ms stall_ms"
    rm -f "$T"/ev.* "$T/pids"
    PHX_WORKERS=2 /usr/bin/time -f "cpu %U %S" -o "$T/cpu" "$B/phx" run -n 8 --pidfile "$T/pids" "$B/jacobi" \
        --phx-ft=1 --phx-recovery="$1" --phx-eventlog="$T/ev.%r.jsonl" $RARGS >"$T/out" 2>/dev/null &
    local j=$!
    if [ "$2" = 1 ]; then
        for _ in $(seq 2000); do grep -qs "\"ev\":\"jacobi_iter\",\"iter\":$K}" "$T/ev.0.jsonl" && break; sleep 0.02; done
        kill -9 "$(awk '$1 == 3 { print $2 }' "$T/pids")" 2>/dev/null
    fi
    wait "$j"
    # The main task's progress: the window around the kill (iterations
    # K - 50 to K + W) and everything after it.
    python3 - "$T" "$K" "${W:-150}" "$(sed -n 's/.*(\([0-9.]*\) ms).*/\1/p' "$T/out" | tail -1)" \
        "$(awk '$1 == "cpu" { print $2 + $3 }' "$T/cpu")" <<'PY'
import glob, json, sys
ev = []
for f in glob.glob(sys.argv[1] + "/ev.*.jsonl"):
    for l in open(f):
        e = json.loads(l)
        if e["ev"] in ("jacobi_iter", "failure"):
            ev.append(e)
its = {e["iter"]: e["t"] for e in ev if e["ev"] == "jacobi_iter"}
k, w = int(sys.argv[2]), int(sys.argv[3])
a, b, z = k - 50, k + w, max(its) if its else 0
ok = sys.argv[4] and a in its and b in its
# Stall: from the first failure notice to the first iteration the job had
# not completed before it (cr redoes the lost ones, mlog replays).
fails = [e["t"] for e in ev if e["ev"] == "failure"]
stall = 0
if fails:
    tf = min(fails)
    top = max([e["iter"] for e in ev if e["ev"] == "jacobi_iter" and e["t"] < tf] or [0])
    nxt = [e["t"] for e in ev if e["ev"] == "jacobi_iter" and e["iter"] == top + 1 and e["t"] > tf]
    stall = (min(nxt) - tf) / 1e6 if nxt else 0
print(sys.argv[4] or 0, sys.argv[5] or 0, (its[b] - its[a]) / 1e6 if ok else 0, (its[z] - its[b]) / 1e6 if ok else 0, stall)
PY
}
: >"$T/lost"
for r in $(seq "$REPS"); do
    for m in cr mlog-causal; do
        a=$(jrun "$m" 0); b=$(jrun "$m" 1)
        echo "$m $a $b" | awk '$2 > 0 && $7 > 0 { print $1, $7 - $2, $8 - $3, $9 - $4, $10 - $5, $11 }' >>"$T/lost"
    done
done
col() { awk -v m="$1" -v c="$2" '$1 == m { print $c }' "$T/lost" | median; }
printf '| mode | stall, ms | time lost to one kill, ms | of which: window (iterations K-50 to K+%s) | after it | CPU lost, s |\n|---|---|---|---|---|---|\n' "${W:-150}"
for m in cr mlog-causal; do
    printf '| %s | %.0f | %.0f | %.0f | %.0f | %.2f |\n' "$m" "$(col "$m" 6)" "$(col "$m" 2)" "$(col "$m" 4)" "$(col "$m" 5)" "$(col "$m" 3)"
done
sc=$(col cr 6); sm=$(col mlog-causal 6)
awk -v c="$sc" -v m="$sm" 'BEGIN { if (m > 0) printf "\nstall: cr / mlog-causal: %.2fx\n", c / m }'
lc=$(col cr 2); lm=$(col mlog-causal 2)
awk -v c="$lc" -v m="$lm" 'BEGIN { if (m > 0) printf "time lost: cr / mlog-causal: %.2fx\n", c / m }'
wc_=$(col cr 4); wm=$(col mlog-causal 4)
awk -v c="$wc_" -v m="$wm" 'BEGIN { if (m > 0) printf "window: cr / mlog-causal: %.2fx\n", c / m }'
fi
