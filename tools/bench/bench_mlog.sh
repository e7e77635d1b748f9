#!/bin/bash
# Message-logging benchmarks, medians of REPS runs.
#  1. The determinant queue: ADD, PIGGYBACK and ACK latency (ns, median of
#     every operation of a run, then the median over runs) at T = 1, 2, 4, 8
#     producers, lock-free (ft/mlog/detq.c) against the same queue behind
#     one mutex (the thesis's Table 7.6, ft/mlog/detq.h), and
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
#  3. Recovery of one kill, mlog-causal with recovery-helpers P = 1, 2, 4
#     against cr (the thesis's setting: re-execution dominates):
#     jacobi on 8 nodes x 2 workers, V = 8 blocks per node, a checkpoint
#     every 400 iterations; rank 3 is SIGKILLed once iteration K = 790 is
#     done, with the checkpoint after it held by jacobi's gate (-H K -g), so
#     the kill lands >= 390 iterations after the last committed checkpoint
#     (400) by construction. Stall: from the first failure notice to the first
#     iteration the job had not completed before it (cr redoes >= K
#     iterations on every node; mlog replays the dead node's tasks on P
#     helpers); of which the recovery round (to the last recovery_done).
#     Recovery: to iteration top + jacobi's residual window (RWIN), the
#     first that needs every block's post-failure work (blocks run ahead of
#     the main task, so under mlog top + 1 may need no replay at all).
#     Both modes run with td=none.
#     Per round, interleaved: cr, then mlog-causal for each P; the ratio
#     cr / mlog of the same round, median over rounds. A run counts only
#     if it and its fault-free pair exit 0 with the same checksum. Also the time lost
#     = (jacobi's ms with the kill) - (without), split into the window
#     around the kill (iterations K-50 to K+W) and the rest, the CPU lost
#     (user + sys of all nodes), and how many ranks hosted rank 3's tasks.
#  4. Going home after a respawn (restart-on=respawn): jacobi MARGS on 8
#     nodes x 2 workers, mlog-causal, recovery-helpers=2, a checkpoint a
#     second; rank 3 is SIGKILLed at the gate (-H, -g), phx run respawns it,
#     and the gate opens once its tasks are home. Per run, the commit of the
#     checkpoint that moved them against the median commit of the run's
#     other checkpoints (the same-run baseline), its ratio, and the tasks
#     moved; medians over runs.
#  5. Fault-free wall against none: jacobi on 8 nodes (default workers),
#     none, mlog-causal and mlog-pessimistic in interleaved rounds, for each
#     of FARGS (default "-N 256 -i 3000 -c 500" and "-N 2048 -i 300 -c 100");
#     per round each mode's whole-job wall (phx run, startup included) and
#     jacobi's own ms over none's, medians of the ratios, against the goals
#     (mlog-pessimistic <= 1.5x none, mlog-causal <= 1.03x), and the CPU
#     time of the whole job (user + sys of phx run and its nodes) over
#     none's; a run counts only with the sequential checksum. MODES5
#     (default "none mlog-causal mlog-pessimistic") picks the modes (none
#     first: the ratios are against it); BASE5=BUILD_DIR runs a second
#     build in the same rounds (A/B: "base", then "this").
# Usage: tools/bench/bench_mlog.sh BUILD_DIR [REPS]
#   PARTS=1,2,3,4,5 (default all); OPS=200000 operations per producer; TS="1 2 4 8";
#   JARGS="-N 2048 -i 2500 -c 250" jacobi's arguments for part 2, MODES2 its modes (none-T: none running jacobi -T, mlog-fast's baseline); part 3:
#   RARGS="-N 2048 -i 950 -c 400 -V 8", K=790 (just before a multiple of -c),
#   W=150 (K+W <= -i),
#   HS="1 2 4" (the P values), PLOTS=DIR: keep the first round's killed runs'
#   event logs there and draw their progress diagrams (tools/timeline);
#   part 4: MARGS="-N 2048 -i 1500 -c 300 -V 8", MK=450 (the gate's iteration).
set -eu
PARTS=${PARTS:-1,2,3,4,5}
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
JARGS=${JARGS:-"-N 2048 -i 2500 -c 250"}
MODES2=${MODES2:-"none cr mlog-causal mlog-pessimistic none-T mlog-fast"}
echo
echo "2. forward-path overhead, jacobi $JARGS on 4 nodes x 2 workers (time = jacobi's ms; ratios per round, medians)"
echo
: >"$T/ratios"
for r in $(seq "$REPS"); do
    line=""
    for m in $MODES2; do
        rm -f "$T"/ev.*
        # none-T: recovery=none running the tagged jacobi that mlog-fast needs
        rec=${m%-T} targs=""
        case "$m" in *-T | mlog-fast) targs=-T ;; esac
        out=$(PHX_WORKERS=2 /usr/bin/time -f "cpu %U %S" -o "$T/cpu" "$B/phx" run -n 4 "$B/jacobi" --phx-ft=1 \
            --phx-recovery="$rec" --phx-eventlog="$T/ev.%r.jsonl" $JARGS $targs 2>/dev/null | tail -1)
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
printf '| mode | CPU s (median) | wall ms (median) | CPU / none (median of rounds) | wall / none (median of rounds) | CPU / cr (median of rounds) |\n|---|---|---|---|---|---|\n'
ratio() {   # ratio KEY_A KEY_B: per round A / B, median
    while read -r l; do a=$(echo "$l" | get "$1"); b=$(echo "$l" | get "$2"); awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) print a / b }'; done <"$T/ratios" | median
}
for m in $MODES2; do
    cpu=$(get "$m" <"$T/ratios" | median)
    ms=$(get "ms_$m" <"$T/ratios" | median)
    base=none
    [ "$m" = mlog-fast ] && base=none-T   # the same tagged app without logging
    rn=$(ratio "$m" "$base")
    rw=$(ratio "ms_$m" "ms_$base")
    rc=$(ratio "$m" cr)
    echo "| $m | $cpu | $ms | $rn | $rw | $rc |"
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
RARGS=${RARGS:-"-N 2048 -i 950 -c 400 -V 8"}
K=${K:-790}
W=${W:-150}
HS=${HS:-"1 2 4"}
# jacobi's residual window (apps/jacobi: blocks run at most bx + by ahead
# of the slowest, and the main task keeps bx + by + 4 iterations): the
# main task's iteration top + RWIN needs every block's post-failure work.
RWIN=$(python3 -c '
import sys
a = sys.argv[1].split()
v = int(a[a.index("-V") + 1]) if "-V" in a else 4
nb, x = v * 8, 1
for d in range(1, nb + 1):
    if d * d <= nb and nb % d == 0:
        x = d
print(nb // x + x + 4)' "$RARGS")
echo
echo "3. recovery of one kill (rank 3 once iteration $K is done, the checkpoint after it held), jacobi $RARGS on 8 nodes x 2 workers; mlog-causal with recovery-helpers P = $HS against cr"
echo
# The kill lands by construction between the checkpoint before K and the
# one due after it: jacobi -H K -g GATE logs jacobi_hold at K and holds
# that checkpoint (the blocks run on) until GATE exists, so cr redoes every
# iteration since the checkpoint before K. The gate opens once rank 0
# logged, after its failure notice, the first iteration it had not done
# before it, plus RWIN (the recovery is over), so the held checkpoint
# never lands inside it. td=none for both (jacobi ends by phx_exit): cr's
# default td=cut probes quiescence with checkpoints, which could land one
# after K and shorten cr's redo.
stalled_out() {   # the recovery is over on rank 0
    local f=$T/ev.0.jsonl top
    grep -qs '"ev":"failure"' "$f" || return 1
    top=$(sed -n '/"ev":"failure"/q; s/.*"ev":"jacobi_iter","iter":\([0-9]*\)}.*/\1/p' "$f" | tail -1)
    sed -n '/"ev":"failure"/,$p' "$f" | grep -q "\"ev\":\"jacobi_iter\",\"iter\":$((${top:-0} + RWIN))}"
}
jrun() {   # jrun MODE HELPERS KILL: prints "ms cpu window_ms after_ms stall_ms round_ms hosts recovery_ms rc checksum"
    rm -f "$T"/ev.* "$T/pids" "$T/gate"
    local hold=""
    [ "$3" = 1 ] && hold="-H $K -g $T/gate"
    PHX_WORKERS=2 /usr/bin/time -f "cpu %U %S" -o "$T/cpu" "$B/phx" run -n 8 --pidfile "$T/pids" "$B/jacobi" \
        --phx-ft=1 --phx-td=none --phx-recovery="$1" --phx-recovery-helpers="$2" --phx-eventlog="$T/ev.%r.jsonl" $RARGS $hold \
        >"$T/out" 2>"$T/err" &
    local j=$!
    if [ "$3" = 1 ]; then
        for _ in $(seq 6000); do
            grep -qs '"ev":"jacobi_hold"' "$T/ev.0.jsonl" && break
            kill -0 "$j" 2>/dev/null || break
            sleep 0.02
        done
        kill -9 "$(awk '$1 == 3 { print $2 }' "$T/pids")" 2>/dev/null
        echo "{\"t\":$(date +%s%N),\"rank\":3,\"signal\":\"SIGKILL\"}" >"$T/kills.jsonl"
        for _ in $(seq 6000); do stalled_out && break; kill -0 "$j" 2>/dev/null || break; sleep 0.05; done
        : >"$T/gate.tmp" && mv -f "$T/gate.tmp" "$T/gate"
    fi
    local rc=0
    wait "$j" || rc=$?
    [ "$rc" = 0 ] || { echo "# $1 P=$2 kill=$3: exit $rc" && tail -3 "$T/err" | sed 's/^/#   /'; } >&2
    if [ -n "${PLOTS:-}" ] && [ "$3" = 1 ] && [ "$round" = 1 ]; then   # the first round's runs, drawn below
        mkdir -p "$PLOTS/$1-P$2" && cp "$T"/ev.*.jsonl "$T/kills.jsonl" "$PLOTS/$1-P$2/"
    fi
    # The main task's progress: the window around the kill (iterations
    # K - 50 to K + W) and everything after it.
    python3 - "$T" "$K" "$W" "$(sed -n 's/.*(\([0-9.]*\) ms).*/\1/p' "$T/out" | tail -1)" \
        "$(awk '$1 == "cpu" { print $2 + $3 }' "$T/cpu")" "$rc" "$RWIN" \
        "$(sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' "$T/out" | tail -1)" <<'PY'
import glob, json, sys
ev = []
for f in glob.glob(sys.argv[1] + "/ev.*.jsonl"):
    r = int(f.rsplit(".", 2)[-2])
    for l in open(f):
        e = json.loads(l)
        if e["ev"] in ("jacobi_iter", "failure", "recovery_done", "restore"):
            e["rank"] = r
            ev.append(e)
# An iteration cr redoes is logged twice: the window opens at the first
# time K-50 was done and closes at the last time K+W was.
its, first = {}, {}
for e in sorted((e for e in ev if e["ev"] == "jacobi_iter"), key=lambda e: e["t"]):
    its[e["iter"]] = e["t"]
    first.setdefault(e["iter"], e["t"])
k, w = int(sys.argv[2]), int(sys.argv[3])
a, b, z = k - 50, k + w, max(its) if its else 0
ok = sys.argv[4] and a in its and b in its
# Stall: from the first failure notice to the first iteration the job had
# not completed before it (cr redoes the lost ones, mlog replays).
fails = [e["t"] for e in ev if e["ev"] == "failure"]
stall = rnd = rec = 0
if fails:
    tf = min(fails)
    top = max([e["iter"] for e in ev if e["ev"] == "jacobi_iter" and e["t"] < tf] or [0])
    nxt = [e["t"] for e in ev if e["ev"] == "jacobi_iter" and e["iter"] == top + 1 and e["t"] > tf]
    stall = (min(nxt) - tf) / 1e6 if nxt else 0
    # Recovery: to iteration top + RWIN, the first that needs post-failure
    # work from every block (under mlog, top + 1 may not need the replay:
    # the blocks ran ahead of the main task).
    nxt = [e["t"] for e in ev if e["ev"] == "jacobi_iter" and e["iter"] == top + int(sys.argv[7]) and e["t"] > tf]
    rec = (min(nxt) - tf) / 1e6 if nxt else 0
    # The recovery round (agreement, restore, hand-back) ends at the last
    # recovery_done; the rest of the stall is redo (cr) or replay (mlog).
    rd = [e["t"] for e in ev if e["ev"] == "recovery_done" and e["t"] > tf]
    rnd = (max(rd) - tf) / 1e6 if rd else 0
hosts = len({e["rank"] for e in ev if e["ev"] == "restore" and e.get("of") == 3 and e["tasks"] > 0})
print(sys.argv[4] or 0, sys.argv[5] or 0, (its[b] - first[a]) / 1e6 if ok else 0, (its[z] - its[b]) / 1e6 if ok else 0,
      stall, rnd, hosts, rec, sys.argv[6], sys.argv[8] or "none")
PY
}
# Per round, interleaved: cr without and with the kill, mlog-causal
# without, then with the kill for each P (P only acts at the failure, so
# one fault-free mlog run is the baseline of every P). A pair counts when
# both exited 0 with the same checksum; any other is listed below the table.
: >"$T/lost"
: >"$T/bad"
pair() {   # pair NAME "fault-free fields" "kill fields"
    echo "$1 $2 $3" | awk -v lost="$T/lost" -v bad="$T/bad" '{
        if ($10 == 0 && $20 == 0 && $2 > 0 && $12 > 0 && $11 == $21)
            print $1, $12 - $2, $13 - $3, $14 - $4, $15 - $5, $16, $17, $18, $19 >>lost
        else
            printf "%s: fault-free exit %s checksum %s, with the kill exit %s checksum %s\n", $1, $10, $11, $20, $21 >>bad }'
}
for round in $(seq "$REPS"); do
    pair cr "$(jrun cr 0 0)" "$(jrun cr 0 1)"
    a=$(jrun mlog-causal 0 0)
    for h in $HS; do
        pair "P=$h" "$a" "$(jrun mlog-causal "$h" 1)"
    done
done
col() { awk -v m="$1" -v c="$2" '$1 == m { print $c }' "$T/lost" | median; }
# cr / mlog of the same round, column c, for P = h: median over rounds.
rat() {
    awk -v h="P=$1" -v c="$2" '$1 == "cr" { v = $c } $1 == h && $c > 0 && v > 0 { print v / $c }' "$T/lost" | median
}
printf '| mode | runs | recovery, ms | recovery: cr / this (median of rounds) | stall, ms | of which: recovery round | stall: cr / this | time lost to one kill, ms | window (iterations K-50 to K+%s) | after it | CPU lost, s | hosts of rank 3 tasks |\n' "$W"
printf '|---|---|---|---|---|---|---|---|---|---|---|---|\n'
for m in cr $(for h in $HS; do echo "P=$h"; done); do
    n=$(awk -v m="$m" '$1 == m' "$T/lost" | wc -l)
    [ "$n" -gt 0 ] || continue
    if [ "$m" = cr ]; then
        name=cr; rr="-"; rs="-"
    else
        name="mlog-causal $m"; rr=$(printf '%.2fx' "$(rat "${m#P=}" 9)"); rs=$(printf '%.2fx' "$(rat "${m#P=}" 6)")
    fi
    printf '| %s | %d | %.0f | %s | %.0f | %.0f | %s | %.0f | %.0f | %.0f | %.2f | %s |\n' "$name" "$n" "$(col "$m" 9)" \
        "$rr" "$(col "$m" 6)" "$(col "$m" 7)" "$rs" "$(col "$m" 2)" "$(col "$m" 4)" "$(col "$m" 5)" "$(col "$m" 3)" \
        "$(col "$m" 8)"
done
[ -s "$T/bad" ] && { echo; echo "runs left out:"; cat "$T/bad"; }
echo
for h in $HS; do
    awk -v c="$(col cr 9)" -v m="$(col "P=$h" 9)" -v s="$(col cr 6)" -v t="$(col "P=$h" 6)" -v h="$h" \
        -v lc="$(col cr 2)" -v lm="$(col "P=$h" 2)" 'BEGIN {
        if (m > 0) printf "P=%s: cr / mlog-causal, ratios of the medians: recovery %.2fx", h, c / m
        if (t > 0) printf "; stall %.2fx", s / t
        if (lc > 0 && lm > 0) printf "; time lost %.2fx", lc / lm
        print "" }'
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# Progress diagrams: every block's iteration against wall time,
# in the color of the node that ran it, for the first round's killed runs.
for d in ${PLOTS:+"$PLOTS"/*-P*/}; do
    m=$(basename "$d")
    /usr/bin/python3 "$(dirname "$0")/../timeline/phx-timeline" -e "$d/ev.%r.jsonl" -k "$d/kills.jsonl" \
        -o "$PLOTS/progress-$m" --series jacobi_blk:iter:blk \
        --title "jacobi $RARGS, 8 nodes, rank 3 killed after iteration $K: $m" | sed "s/^/$m: /"
done
fi
if part 4; then
MARGS=${MARGS:-"-N 2048 -i 1500 -c 300 -V 8"}
MK=${MK:-450}
echo
echo "4. going home after a respawn: jacobi $MARGS on 8 nodes x 2 workers, mlog-causal, recovery-helpers=2, restart-on=respawn, ckpt-interval=1; rank 3 killed at iteration $MK"
echo
: >"$T/home"
for round in $(seq "$REPS"); do
    rm -f "$T"/ev.* "$T/pids" "$T/gate"
    PHX_WORKERS=2 "$B/phx" run -n 8 --pidfile "$T/pids" "$B/jacobi" --phx-ft=1 --phx-td=none \
        --phx-recovery=mlog-causal --phx-recovery-helpers=2 --phx-restart-on=respawn --phx-ckpt-interval=1 \
        --phx-eventlog="$T/ev.%r.jsonl" $MARGS -H "$MK" -g "$T/gate" >"$T/out" 2>"$T/err" &
    j=$!
    for _ in $(seq 6000); do
        grep -qs '"ev":"jacobi_hold"' "$T/ev.0.jsonl" && break
        kill -0 "$j" 2>/dev/null || break
        sleep 0.02
    done
    kill -9 "$(awk '$1 == 3 { print $2 }' "$T/pids")" 2>/dev/null
    for _ in $(seq 6000); do grep -qs '"ev":"home"' "$T/ev.0.jsonl" && break; kill -0 "$j" 2>/dev/null || break; sleep 0.05; done
    : >"$T/gate.tmp" && mv -f "$T/gate.tmp" "$T/gate"
    rc=0
    wait "$j" || rc=$?
    python3 - "$T" "$rc" >>"$T/home" <<'PY'
import glob, json, statistics, sys
d, rc = sys.argv[1], sys.argv[2]
ev = [json.loads(l) for l in open(d + "/ev.0.jsonl")]
home = [e["epoch"] for e in ev if e["ev"] == "home"]
com = {e["epoch"]: e["ms"] for e in ev if e["ev"] == "ckpt_commit"}
others = [ms for ep, ms in com.items() if ep > 1 and ep not in home]
moved = sum(json.loads(l)["tasks"] for f in glob.glob(d + "/ev.*.jsonl") for l in open(f) if '"ev":"migrate_in"' in l)
if rc == "0" and home and home[0] in com and others:
    print(com[home[0]], statistics.median(others), com[home[0]] / statistics.median(others), moved)
else:
    print("# run left out: exit", rc, "home epochs", home, file=sys.stderr)
PY
done
[ -s "$T/home" ] && python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
m = lambda i: statistics.median(r[i] for r in rows)
print("| runs | moving checkpoint commit, ms | other commits of the run, ms (median) | ratio (median of runs) | tasks moved |")
print("|---|---|---|---|---|")
print("| %d | %.1f | %.1f | %.2fx | %d |" % (len(rows), m(0), m(1), m(2), m(3)))' <"$T/home"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
fi

if part 5; then
FMODES=${MODES5:-"none mlog-causal mlog-pessimistic"}
# Builds: this one (label "this"), and with BASE5=BUILD_DIR a second one
# ("base") run in the same rounds, just before it.
FBUILDS="this=$B"
[ -n "${BASE5:-}" ] && FBUILDS="base=$BASE5/bin $FBUILDS"
echo
echo "5. fault-free wall against none, jacobi on 8 nodes (default workers); ratios per round, medians"
echo "   (builds: $FBUILDS; load at the start $(cut -d' ' -f1-3 /proc/loadavg))"
echo
printf '| jacobi | build | mode | runs | wall s (median) | jacobi ms (median) | CPU s (median) | wall / none | jacobi ms / none | CPU / none | goal |\n|---|---|---|---|---|---|---|---|---|---|---|\n'
IFS=';' read -ra FSETS <<<"${FARGS:-"-N 256 -i 3000 -c 500;-N 2048 -i 300 -c 100"}"
for fa in "${FSETS[@]}"; do
    # shellcheck disable=SC2086
    ref=$("$B/jacobi" --seq $fa -P 8 | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
    : >"$T/f5"
    for _ in $(seq "$REPS"); do
        line=""
        for fb in $FBUILDS; do
            lb=${fb%%=*} bd=${fb#*=}
            for m in $FMODES; do
                # shellcheck disable=SC2086
                out=$(/usr/bin/time -f "wall %e %U %S" -o "$T/wall" "$bd/phx" run -n 8 "$bd/jacobi" --phx-ft=1 \
                    --phx-recovery="$m" $fa 2>/dev/null | tail -1)
                sum=$(echo "$out" | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
                ms=$(echo "$out" | sed -n 's/.*(\([0-9.]*\) ms).*/\1/p')
                w=$(awk '$1 == "wall" { print $2 }' "$T/wall")
                cpu=$(awk '$1 == "wall" { print $3 + $4 }' "$T/wall")
                [ "$sum" = "$ref" ] || { w=""; ms=""; cpu=""; echo "part 5: $lb $m $fa: checksum ${sum:-none}, expected $ref" >&2; }
                line="$line w_${lb}_$m=$w ms_${lb}_$m=$ms c_${lb}_$m=$cpu"
            done
        done
        echo "$line" >>"$T/f5"
    done
    # ratio K: per round, K of the mode over K of the same build's none; median.
    ratio() { while read -r l; do a=$(echo "$l" | field "$1_$2_$3"); b=$(echo "$l" | field "$1_$2_none")
              awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0 && b > 0) print a / b }'; done <"$T/f5" | median; }
    for fb in $FBUILDS; do
        lb=${fb%%=*}
        for m in $FMODES; do
            runs=$(field "w_${lb}_$m" <"$T/f5" | grep -c .)
            w=$(field "w_${lb}_$m" <"$T/f5" | grep . | median)
            ms=$(field "ms_${lb}_$m" <"$T/f5" | grep . | median)
            cpu=$(field "c_${lb}_$m" <"$T/f5" | grep . | median)
            rw=$(ratio w "$lb" "$m"); rj=$(ratio ms "$lb" "$m"); rc=$(ratio c "$lb" "$m")
            case $m in mlog-pessimistic) goal=1.5 ;; mlog-causal) goal=1.03 ;; *) goal="" ;; esac
            verdict=""
            [ -n "$goal" ] && verdict="<= ${goal}x: $(awk -v r="${rw:-1e9}" -v g="$goal" 'BEGIN { print (r <= g) ? "yes" : "NO" }')"
            printf '| %s | %s | %s | %s | %s | %s | %s | %.3f | %.3f | %.3f | %s |\n' "$fa" "$lb" "$m" "$runs" "${w:--}" \
                "${ms:--}" "${cpu:--}" "${rw:-0}" "${rj:-0}" "${rc:-0}" "$verdict"
        done
    done
    echo "load after $fa: $(cut -d' ' -f1-3 /proc/loadavg)"
done
fi
