#!/bin/bash
# Drain against crash recovery (recovery=cr) on loopback, medians of REPS:
# jacobi on N nodes (default 6), a checkpoint every 100 iterations; rank 3
# gets SIGTERM (drain-on=term: it hands its tasks over at a cut and exits 0)
# or SIGKILL (a crash: detection, rollback of every node, re-execution) at
# the same point, the main task's iteration AT (default 350: mid-interval,
# where a crash loses half a checkpoint period on average). Each round runs
# a drained job and a crashed one, interleaved, so both see the same load.
#   leaver exit   SIGTERM to the leaver's exit (its event log: drain_request
#                 to its exit event; a SIGKILLed node is gone at once)
#   job lost      the time the job made no net progress: the crash, from the
#                 SIGKILL until the main task logs, for the last time, the
#                 iteration after the last it logged before it (detection,
#                 agreement, restores and the re-execution from the
#                 checkpoint); the drain, the
#                 pause of its checkpoint at the slowest survivor (BEGIN to
#                 COMMIT, workers parked), as the job keeps computing until
#                 the cut and nothing is redone. (A wall-time difference to a
#                 fault-free run would mislead on an oversubscribed host:
#                 five nodes on two cores run faster than six.)
#   recovery      the crash's recovery round at rank 0 (notice to its end)
# Goal (issue 25): a drain loses at most 10 % of what the crash loses.
# Usage: tools/bench/bench_drain.sh BUILD_DIR [REPS]
set -eu
B=${1:-build}/bin
REPS=${2:-5}
N=${N:-6}
AT=${AT:-350}
REC=${REC:-cr}   # or a message-logging mode (mlog-causal, mlog-pessimistic; mlog-fast needs ARGS with -T)
ARGS=${ARGS:-"-N 256 -i 3000 -c 100"}
T=$(mktemp -d /tmp/phx-bench-drain.XXXXXX)
trap 'rm -rf "$T"' EXIT
export PHX_WORKERS=${PHX_WORKERS:-2}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ref=$("$B/jacobi" --seq $ARGS -P "$N" | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
echo "phalanx drain benchmark: jacobi $ARGS on $N nodes, rank 3 at iteration $AT, $REPS rounds, medians" \
     "($(nproc) cores, $(date -u +%F))"

# one KIND (term|kill): runs the job, prints "leaver_ms lost_ms recovery_ms ok"
one() {
    rm -f "$T"/ev.* "$T/pids" "$T/out"
    timeout -k 5 120 "$B/phx" run -n "$N" --pidfile "$T/pids" "$B/jacobi" --phx-ft=1 --phx-recovery="$REC" \
        --phx-eventlog="$T/ev.%r.jsonl" $ARGS >"$T/out" 2>/dev/null &
    job=$!
    until grep -qs "\"iter\":$AT}" "$T"/ev.*.jsonl && [ -s "$T/pids" ]; do sleep 0.01; done
    victim=$(awk '$1 == 3 { print $2 }' "$T/pids")
    date +%s%N >"$T/t_sig"   # CLOCK_REALTIME, the event log's clock
    kill "-$([ "$1" = term ] && echo TERM || echo KILL)" "$victim"
    wait "$job" || true
    ok=0
    grep -q "checksum=$ref" "$T/out" && ok=1
    python3 - "$T" "$1" "$ok" "$(cat "$T/t_sig")" <<'EOF'
import glob, json, sys
d, kind, ok, tsig = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ev = {}
for f in glob.glob(d + "/ev.*.jsonl"):
    r = int(f.split(".")[-2])
    ev[r] = []
    for line in open(f):
        try:
            ev[r].append(json.loads(line))
        except ValueError:
            pass
allv = [e for r in ev for e in ev[r]]
first, last = {}, {}
for e in allv:
    if e["ev"] == "jacobi_iter":
        k = e["iter"]
        first[k] = min(first.get(k, e["t"]), e["t"])
        last[k] = max(last.get(k, 0), e["t"])   # re-executed: logged again after the rollback
i = max(k for k in first if first[k] < tsig)
leaver, lost, rec = 0.0, -1.0, 0.0
if kind == "term":
    l = ev.get(3, [])
    req = [e["t"] for e in l if e["ev"] == "drain_request"]
    ex = [e["t"] for e in l if e["ev"] == "exit"]
    leaver = (ex[0] - req[0]) / 1e6 if req and ex else -1
    plan = [e for e in ev.get(0, []) if e["ev"] == "drain_plan"]
    if plan:
        ep = plan[0]["epoch"]
        c = [e for e in allv if e["ev"] == "ckpt_commit" and e.get("epoch") == ep and e["rank"] != 3]
        lost = max(e["ms"] for e in c) if c else -1
    if any(e["ev"] in ("rollback", "failure") for e in allv):
        ok = "0"   # a drain that fell back to a recovery is not a drain
if kind == "kill":
    # The last run of iteration i + 1 (its first came after the rollback,
    # or before it when the checkpoint's cut was past i on a slow host).
    lost = (last[i + 1] - tsig) / 1e6 if i + 1 in last else -1
    r0 = ev.get(0, [])
    f = [e["t"] for e in r0 if e["ev"] == "failure"]
    d_ = [e["t"] for e in r0 if e["ev"] == "recovery_done"]
    rec = (d_[0] - f[0]) / 1e6 if f and d_ else -1
print("%.3f %.3f %.3f %s" % (leaver, lost, rec, ok))
EOF
}

: >"$T/rows"
for i in $(seq "$REPS"); do
    d=$(one term); k=$(one kill)
    echo "round $i: drain [$d] kill [$k]" >&2
    echo "$d $k" >>"$T/rows"
done
# columns: drain 1-4, kill 5-8
col() { awk -v c="$1" '{ print $c }' "$T/rows" | median; }
bad=$(awk '$4 != 1 || $8 != 1' "$T/rows" | wc -l)
dl=$(col 2); kl=$(col 6)
printf '\n| rank 3 at iteration %s, %s nodes | SIGTERM to leaver exit (ms) | job lost (ms) |\n|---|---|---|\n' "$AT" "$N"
printf '| drain (SIGTERM) | %s | %s (its checkpoint pause) |\n' "$(col 1)" "$dl"
printf '| crash (SIGKILL) | 0 | %s (recovery round %s ms, then re-execution) |\n' "$kl" "$(col 7)"
awk -v d="$dl" -v k="$kl" 'BEGIN { if (k > 0) printf "drain loses %.1f %% of what the crash loses (goal: <= 10 %%)\n", 100 * d / k }'
echo "runs with a wrong checksum, or a drain that fell back to recovery: $bad"
