#!/bin/bash
# Termination detection end to end: the tdk kernels (apps/tdk) on 8 loopback
# nodes under every detector, and SIGKILL of an interior node under the
# fault-tolerant ones (and under a fault-free one with PHX_FT=1).
#
# Oracle (seed 001 §6 R1, seed 000 §6 R1/R3): a job must end by the
# detector, never before the last task: every node's td_declare is later
# than every node's last task completion (both CLOCK_REALTIME, same host).
# After a kill: the job ends either TERMINATED (survivors exit 0, declared
# after the kill and after their last task) or FATAL (non-zero, with the
# detector's "cannot decide termination" line); a hang is a failure, and
# the bound for "hang" is derived from the heartbeat timeout and the
# measured length of the same run without a kill.
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
export PHX_STARTUP_TIMEOUT=10000
STARTUP_S=10
# Fault-free kernel runs take ~0.1-0.5 s here; 60 s past startup is "hung".
JOB_S=$((STARTUP_S + 60))
PROJ_T=1e-9 PROJ_TASKS=5035 PROJ_LEAVES=2518   # tdk project's tree at 1e-9

# job LIMIT_S ARGS...: phx run with an event log; rc 124 means it hit LIMIT_S.
job() {
    lim=$1; shift
    rm -f "$TMP"/ev.*.jsonl "$TMP/pids" "$TMP/kills"
    PHX_EVENTLOG="$TMP/ev.%r.jsonl" timeout -k 5 "$lim" "$PHX" run -n $N --pidfile "$TMP/pids" "$@" \
        >"$TMP/out" 2>"$TMP/err"
    echo $? >"$TMP/rc"
}
rc_is() { [ "$(cat "$TMP/rc")" = "$1" ]; }
no_signal_deaths() { ! grep -q "killed by signal" "$TMP/err"; }
# Every node printed its tdk-node line with rc=$1 (N minus killed ones: $2).
nodes_rc() { [ "$(grep -c "tdk-node: .* rc=$1 " "$TMP/out")" = "${2:-$N}" ]; }

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
    check "project result with td=$td" \
        grep -q "tdk project: nodes=$N .* tasks=$PROJ_TASKS leaves=$PROJ_LEAVES .* OK " "$TMP/out"
    check "every node exits 0, none killed, td=$td" eval 'nodes_rc 0 && no_signal_deaths'
    check "td_declare on every node after the last task, td=$td" safety
done

# Other placements (the paper's round-robin, random and subtree mappings).
for m in rr:4c random:cda subtree:rellazy; do
    PHX_TD=${m#*:} job $JOB_S "$TDK" --map "${m%%:*}" project $PROJ_T
    check "project --map ${m%%:*} with td=${m#*:}" \
        eval 'rc_is 0 && grep -q "tasks=$PROJ_TASKS leaves=$PROJ_LEAVES .* OK " "$TMP/out" && safety >/dev/null'
done

# Fault-tolerant detectors with the failure detector on, no failure.
for td in indep rellazy releager; do
    PHX_FT=1 PHX_TD=$td job $JOB_S "$TDK" project $PROJ_T
    check "project with PHX_FT=1 td=$td, no failure (rc $(cat "$TMP/rc"))" \
        eval 'rc_is 0 && grep -q "tasks=$PROJ_TASKS .* OK " "$TMP/out" && nodes_rc 0 && safety >/dev/null'
done

# ---- ring and walk on a few detectors ------------------------------------
for td in 4c cda rellazy; do
    PHX_TD=$td job $JOB_S "$TDK" ring 400
    check "ring 400 with td=$td" \
        eval 'rc_is 0 && grep -q "tdk ring: nodes=$N hops=400 OK" "$TMP/out" && nodes_rc 0 && safety >/dev/null'
    hops=$(sed -n 's/.*tdk-node: .* hops=\([0-9]*\) .*/\1/p' "$TMP/out" | awk '{ s += $1 } END { print s }')
    check "ring hops summed over nodes = 400 (td=$td: $hops)" [ "$hops" = 400 ]
done
walkers=""
for td in edod hcda releager; do
    PHX_TD=$td job $JOB_S "$TDK" walk 2000 0.1 7
    check "walk 2000 0.1 7 with td=$td" \
        eval 'rc_is 0 && grep -q "tdk walk: nodes=$N hops=2000 .* OK" "$TMP/out" && nodes_rc 0 && safety >/dev/null'
    w=$(sed -n 's/.*tdk walk: .* walkers=\([0-9]*\) .*/\1/p' "$TMP/out")
    [ -z "$walkers" ] && walkers=$w
    check "walk forks are a function of the seed (td=$td: $w walkers, first $walkers)" \
        eval '[ -n "$w" ] && [ "$w" = "$walkers" ]'
done

# ---- SIGKILL of an interior node ----------------------------------------
# Heartbeat timeout delta; a failure is known everywhere within about
# 2*delta + broadcast, so 10*delta is generous.
HB_MS=${PHX_HB_TIMEOUT:-1000}   # delta; every wait below derives from it
export PHX_HB_TIMEOUT=$HB_MS
VICTIM=3            # interior: with --map random every node holds cells
                    # with children elsewhere while the tree grows
WORK_US=1000        # ~2-3 s runs: time for the kill to land mid-run
KARGS="--map random --work $WORK_US project $PROJ_T 5"

# kill_run TD: calibrate (same job, no kill), then kill VICTIM at 40 %.
kill_run() {
    td=$1
    t0=$(date +%s%N)
    PHX_FT=1 PHX_TD=$td job $JOB_S "$TDK" $KARGS
    len_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    if ! rc_is 0; then
        fail "calibration run td=$td (rc $(cat "$TMP/rc"))"
        return 1
    fi
    at=$(awk -v l="$len_ms" 'BEGIN { printf "%.3f", l * 0.4 / 1000 }')
    limit=$(( STARTUP_S + 3 * len_ms / 1000 + 10 * HB_MS / 1000 + 10 ))
    rm -f "$TMP"/ev.*.jsonl "$TMP/pids" "$TMP/kills"
    PHX_FT=1 PHX_TD=$td PHX_EVENTLOG="$TMP/ev.%r.jsonl" timeout -k 5 "$limit" \
        "$PHX" run -n $N --pidfile "$TMP/pids" "$TDK" $KARGS >"$TMP/out" 2>"$TMP/err" &
    L=$!; PIDS="$PIDS $L"
    "$CHAOS" --pidfile "$TMP/pids" --wait-pidfile "$STARTUP_S" --at "$at" --log "$TMP/kills" \
        rank $VICTIM >"$TMP/chaos" 2>&1
    wait "$L"; echo $? >"$TMP/rc"
    echo "#   td=$td: calibration ${len_ms} ms, kill at ${at} s, bound ${limit} s, rc $(cat "$TMP/rc")"
}

for td in indep rellazy releager; do
    kill_run "$td" || continue
    rc=$(cat "$TMP/rc")
    check "td=$td: no hang after killing rank $VICTIM (rc $rc)" eval '[ "$rc" != 124 ] && [ "$rc" != 137 ]'
    check "td=$td: the kill was delivered" grep -q "SIGKILL" "$TMP/kills"
    check "td=$td: launcher reports the killed rank" grep -q "rank $VICTIM (pid .*killed by signal 9" "$TMP/err"
    if [ "$rc" = 0 ]; then
        echo "#   td=$td: TERMINATED"
        check "td=$td: all $((N - 1)) survivors exit 0" nodes_rc 0 $((N - 1))
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
    kill_run "$td" || continue
    rc=$(cat "$TMP/rc")
    check "fault-free td=$td + PHX_FT=1 + kill: no hang (rc $rc)" eval '[ "$rc" != 124 ] && [ "$rc" != 137 ]'
    check "fault-free td=$td: the kill was delivered (the job was still running)" grep -q "SIGKILL" "$TMP/kills"
    check "fault-free td=$td: non-zero exit ($rc)" [ "$rc" != 0 ]
    check "fault-free td=$td: clear error line" grep -q "$td cannot decide termination.*fault-free detector saw a failure" "$TMP/err"
    check "fault-free td=$td: no td_declare" eval '! grep -qh td_declare "$TMP"/ev.*.jsonl'
done
finish
