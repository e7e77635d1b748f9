#!/bin/bash
# Termination detection end to end: the tdk kernels (apps/tdk) on 8 loopback
# nodes under every detector, and SIGKILL of an interior node under the
# fault-tolerant ones (and under a fault-free one with PHX_FT=1).
#
# Oracle: a job must end by the
# detector, never before the last task: every node's td_declare is later
# than every node's last task completion (both CLOCK_REALTIME, same host).
# Results are compared with the fault-free values of the kernels (the tree
# of project 1e-9, its integral bit for bit, the walkers of seed 7), not
# only with the app's own OK.
#
# Kills land inside the work by construction: `tdk --hold GATE` keeps every
# leaf's result on its node until GATE exists, a node logs "tdk_hold" once
# it holds a cell that is pending until then, and phx-chaos kills the
# victim after that line (--start-on) and opens GATE once the victim is
# gone (--gate).
# After a kill: the job ends either TERMINATED (survivors exit 0, declared
# after the kill and after their last task) or FATAL (non-zero, with the
# detector's "cannot decide termination" line); a hang is a failure, and
# the bound for "hang" is derived from the startup and heartbeat timeouts.
# Usage: test_td.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
TDK=$BIN/tdk
CHAOS=$(cd "$(dirname "$0")/../../tools/chaos" && pwd)/phx-chaos
unset PHX_TD PHX_FT PHX_EVENTLOG PHX_STATS PHX_PIDFILE
N=8
# Startup is bounded by the runtime's own startup timeout; set it so the
# job bound below follows from configuration.
# The runtime's default (30 s): 8 sanitized nodes starting beside a second
# copy of the suite on 2 cores may need more than 10 s.
export PHX_STARTUP_TIMEOUT=30000
STARTUP_S=30
# Fault-free kernel runs take ~0.1-0.5 s here; 60 s past startup is "hung".
JOB_S=$((STARTUP_S + 60))
# Fault-free answers: project 1e-9 (any placement) and walk 2000 0.1 7.
PROJ_T=1e-9 PROJ_TASKS=5035 PROJ_LEAVES=2518 PROJ_DEPTH=14 PROJ_INT=242582597.7048957
PROJ_LINE="tdk project: nodes=$N thresh=1e-09 map=[a-z]* tasks=$PROJ_TASKS leaves=$PROJ_LEAVES depth=$PROJ_DEPTH integral=$PROJ_INT .* OK "
WALKERS=164

# job LIMIT_S ARGS...: phx run with an event log; rc 124 means it hit LIMIT_S.
job() {
    lim=$1; shift
    rm -f "$TMP"/ev.*.jsonl "$TMP/pids" "$TMP/kills"
    PHX_EVENTLOG="$TMP/ev.%r.jsonl" timeout -k 5 "$lim" "$PHX" run -n $N --pidfile "$TMP/pids" "$@" \
        >"$TMP/out" 2>"$TMP/err"
    echo $? >"$TMP/rc"
    rc_is 0 || { echo "#   rc $(cat "$TMP/rc"):"; grep -v "tdk-node:" "$TMP/err" | head -5 | sed 's/^/#   /'; }
}
rc_is() { [ "$(cat "$TMP/rc")" = "$1" ]; }
no_signal_deaths() { ! grep -q "killed by signal" "$TMP/err"; }
# Every node printed its tdk-node line with rc=$1 (N minus killed ones: $2).
nodes_rc() { [ "$(grep -c "tdk-node: .* rc=$1 " "$TMP/out")" = "${2:-$N}" ]; }
# sum_nodes FIELD: FIELD= of the tdk-node lines, summed over the nodes.
sum_nodes() { sed -n "s/.*tdk-node: .* $1=\([0-9]*\) .*/\1/p" "$TMP/out" | awk '{ s += $1 } END { print s + 0 }'; }
# The project's answer line, exactly the fault-free one.
project_ok() { grep -q "$PROJ_LINE" "$TMP/out" && [ "$(sum_nodes leaves)" = $PROJ_LEAVES ]; }

# safety [KILLED_RANK]: the event-log oracle. Prints why it fails.
safety() {
    python3 - "$TMP" "${1:--1}" <<'EOF'
import glob, json, re, sys
tmp, killed = sys.argv[1], int(sys.argv[2])
decl, fatal = {}, {}
for f in glob.glob(tmp + "/ev.*.jsonl"):
    for line in open(f):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("ev") == "td_declare":
            decl.setdefault(e["rank"], []).append(e["t"])
        if e.get("ev") == "td_fatal":
            fatal.setdefault(e["rank"], []).append(e["t"])
last = {}
for line in open(tmp + "/out"):
    m = re.search(r"tdk-node: rank=(\d+) rc=(-?\d+) .* last_task_rt_ns=(\d+)", line)
    if m:
        last[int(m.group(1))] = int(m.group(3))
kill_t = None
try:
    for line in open(tmp + "/kills"):
        kill_t = json.loads(line)["t"]
except OSError:
    pass
bad = []
survivors = sorted(r for r in last if r != killed)
if any(len(v) > 1 for v in decl.values()):
    bad.append("a node declared twice: %s" % decl)
if decl and fatal:
    bad.append("both td_declare and td_fatal: %s %s" % (sorted(decl), sorted(fatal)))
if decl:
    missing = [r for r in survivors if r not in decl]
    if missing:
        bad.append("survivors without td_declare: %s" % missing)
    first = min(t for v in decl.values() for t in v)
    lastw = max(last[r] for r in survivors)
    if first < lastw:
        bad.append("PREMATURE: first td_declare %d ns before the last task" % (lastw - first))
    if kill_t is not None and first < kill_t:
        bad.append("declared before the kill")
    print("declare after last task: %.3f ms" % ((first - lastw) / 1e6))
elif not fatal:
    bad.append("neither td_declare nor td_fatal")
if kill_t is not None:
    lastw = max(last[r] for r in survivors) if survivors else 0
    if lastw <= kill_t:
        bad.append("no task ran after the kill: the kill was not mid-run")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
}

# ---- fault-free: the refinement example under every detector -----------
for td in 4c edod hcda cda indep rellazy releager; do
    PHX_TD=$td job $JOB_S "$TDK" project $PROJ_T
    check "project $PROJ_T on $N nodes ends by quiescence with td=$td (rc $(cat "$TMP/rc"))" rc_is 0
    check "project result with td=$td is the fault-free one" project_ok
    check "every node exits 0, none killed, td=$td" eval 'nodes_rc 0 && no_signal_deaths'
    check "td_declare on every node after the last task, td=$td" safety
done

# Other placements (the paper's round-robin, random and subtree mappings).
for m in rr:4c random:cda subtree:rellazy; do
    PHX_TD=${m#*:} job $JOB_S "$TDK" --map "${m%%:*}" project $PROJ_T
    check "project --map ${m%%:*} with td=${m#*:}" \
        eval 'rc_is 0 && project_ok && safety >/dev/null'
done

# Fault-tolerant detectors with the failure detector on, no failure.
for td in indep rellazy releager; do
    PHX_FT=1 PHX_TD=$td job $JOB_S "$TDK" project $PROJ_T
    check "project with PHX_FT=1 td=$td, no failure (rc $(cat "$TMP/rc"))" \
        eval 'rc_is 0 && project_ok && nodes_rc 0 && safety >/dev/null'
done

# ---- ring and walk on a few detectors ------------------------------------
for td in 4c cda rellazy; do
    PHX_TD=$td job $JOB_S "$TDK" ring 400
    check "ring 400 with td=$td" \
        eval 'rc_is 0 && grep -q "tdk ring: nodes=$N hops=400 OK" "$TMP/out" && nodes_rc 0 && safety >/dev/null'
    hops=$(sum_nodes hops)
    check "ring hops summed over nodes = 400 (td=$td: $hops)" [ "$hops" = 400 ]
done
for td in edod hcda releager; do
    PHX_TD=$td job $JOB_S "$TDK" walk 2000 0.1 7
    check "walk 2000 0.1 7 with td=$td" \
        eval 'rc_is 0 && grep -q "tdk walk: nodes=$N hops=2000 .* OK" "$TMP/out" && nodes_rc 0 && safety >/dev/null'
    w=$(sed -n 's/.*tdk walk: .* walkers=\([0-9]*\) .*/\1/p' "$TMP/out")
    check "walk forks are a function of the seed (td=$td: $w walkers, expected $WALKERS)" [ "$w" = $WALKERS ]
    check "walk hops summed over nodes = 2000 (td=$td)" [ "$(sum_nodes hops)" = 2000 ]
done

# ---- SIGKILL of an interior node ----------------------------------------
HB_MS=$(hb_ms)      # delta; every bound below derives from it
export PHX_HB_TIMEOUT=$HB_MS
VICTIM=3            # with --map random every node holds interior cells
KARGS="--map random project $PROJ_T 5"
# A failure is known everywhere within about 2*delta + broadcast; the
# survivors then finish the (already grown) tree: 20*delta is generous.
KILL_S=$(( STARTUP_S + 20 * HB_MS / 1000 + 30 ))

# kill_run TD: the job holds its work on a gate; VICTIM is killed once it
# logs tdk_hold (it holds a cell that cannot complete before the gate
# opens), and the gate opens once VICTIM is gone.
kill_run() {
    td=$1
    rm -f "$TMP"/ev.*.jsonl "$TMP/pids" "$TMP/kills"
    gate=$(gate_new "$td")
    PHX_FT=1 PHX_KEEP_GOING=1 PHX_TD=$td PHX_EVENTLOG="$TMP/ev.%r.jsonl" timeout -k 5 "$KILL_S" \
        "$PHX" run -n $N --pidfile "$TMP/pids" "$TDK" --hold "$gate" $KARGS >"$TMP/out" 2>"$TMP/err" &
    L=$!; PIDS="$PIDS $L"
    # phx-chaos opens the gate in every case, so a failed kill cannot hang the job.
    "$CHAOS" --pidfile "$TMP/pids" --wait-pidfile "$JOB_S" --eventlog "$TMP/ev.%r.jsonl" \
        --start-on tdk_hold --start-ranks $VICTIM --timeout "$JOB_S" --gate "$gate" \
        --log "$TMP/kills" rank $VICTIM >"$TMP/chaos" 2>&1 || sed 's/^/#   /' "$TMP/chaos"
    wait "$L"; echo $? >"$TMP/rc"
    echo "#   td=$td: bound ${KILL_S} s, rc $(cat "$TMP/rc")"
}
# After a kill no answer at all is fine only with a non-zero exit; an
# answer, if printed, is the fault-free one.
answer_honest() { if grep -q "tdk project:" "$TMP/out"; then project_ok; else ! rc_is 0; fi; }

for td in indep rellazy releager; do
    kill_run "$td"
    rc=$(cat "$TMP/rc")
    check "td=$td: no hang after killing rank $VICTIM (rc $rc)" eval '[ "$rc" != 124 ] && [ "$rc" != 137 ]'
    check "td=$td: the kill was delivered while rank $VICTIM held work" grep -q "SIGKILL" "$TMP/kills"
    check "td=$td: launcher reports the killed rank" grep -q "rank $VICTIM (pid .*killed by signal 9" "$TMP/err"
    check "td=$td: no result line claims a wrong result" eval '! grep -q WRONG "$TMP/out"'
    check "td=$td: an answer only if it is the fault-free one; none only with a non-zero exit" answer_honest
    # tdk registers no phx_on_failure and no recovery covers the victim's
    # cells: a clean exit 0 would hide lost work.
    check "td=$td: work lost is never exit 0" eval '[ "$rc" != 0 ]'
    if [ "$rc" = 76 ]; then
        # Terminated among the survivors, but the victim's cells are lost and
        # tdk registers no phx_on_failure: the honest code is 76, work lost.
        echo "#   td=$td: TERMINATED, WORK LOST"
        check "td=$td: phx names the lost rank (76)" grep -q "phx: exit 76 (work lost): rank(s) $VICTIM " "$TMP/err"
        check "td=$td: no result line claims a wrong result" eval '! grep -q WRONG "$TMP/out"'
        check "td=$td: declared after the kill and after every survivor's last task" safety $VICTIM
    else
        echo "#   td=$td: FATAL"
        check "td=$td: the detector says why (rc $rc)" grep -q "cannot decide termination" "$TMP/err"
        check "td=$td: every survivor exits $rc" nodes_rc "$rc" $((N - 1))
        check "td=$td: no td_declare beside the fatal end" safety $VICTIM
    fi
done

# A fault-free detector with the failure detector on: the failure notice
# must end the job with the detector's error, not leave it hanging.
for td in 4c cda; do
    kill_run "$td"
    rc=$(cat "$TMP/rc")
    check "fault-free td=$td + PHX_FT=1 + kill: no hang (rc $rc)" eval '[ "$rc" != 124 ] && [ "$rc" != 137 ]'
    check "fault-free td=$td: the kill was delivered while rank $VICTIM held work" grep -q "SIGKILL" "$TMP/kills"
    check "fault-free td=$td: non-zero exit ($rc)" [ "$rc" != 0 ]
    check "fault-free td=$td: clear error line" grep -q "$td cannot decide termination.*fault-free detector saw a failure" "$TMP/err"
    check "fault-free td=$td: no td_declare" eval '! grep -qh td_declare "$TMP"/ev.*.jsonl'
done
finish
