#!/bin/bash
# Drain under recovery=cr on 6 loopback nodes, 2 workers each: apps/jacobi
# with a checkpoint every 100 iterations. A node told to stop (SIGTERM with
# drain-on=term, the default, or `phx drain RANK`) hands its slices to the
# survivors at the next checkpoint's cut and exits 0; the job goes on and
# prints the sequential reference checksum (jacobi --seq) bit for bit, with
# no failure declared, no rollback and no recovery round in any event log.
# Then: a drain whose grace runs out (PHX_DRAIN_HOLD keeps the request from
# leaving the node, SIGKILL follows) is an ordinary failure, recovered;
# drain-on=off keeps SIGTERM a crash; the coordinator (rank 0) drains;
# cancelling the whole job (phx run gets SIGTERM) still stops it at once,
# without any drain; SIGTERM to every node at once ends the job, saying so.
# Signals land by construction: the test waits for the main task's
# jacobi_iter line in the JSON event log (or the leaver's drain_held line)
# before sending them.
# With "mlog" (ctest it_drain_mlog): the same drain of rank 3 under
# mlog-causal, mlog-fast (jacobi -T) and mlog-pessimistic, which drain like
# cr (their logs and determinants from before the drain's commit are
# dropped at it, and what stays is keyed by task); the coordinator's drain,
# a drain after a partial recovery (the leaver hands over tasks it took
# from the dead node) and a failure racing a drain under mlog-causal; then,
# in each mode,
# SIGKILL of a node that took some of rank 3's slices, after the drain
# committed: a first failure of its period,
# recovered partially (its tasks, rank 3's former ones among them, restored
# from the last commit and replayed) to the same result. That kill lands
# before the job ends by construction: the checkpoint after iteration 600
# and the job's end wait on a gate file (jacobi -H -g) that opens once the
# recovery round ended. mlog-team refuses (its teams are fixed ranks):
# SIGTERM stops the node, recovered as a crash.
# Usage: test_drain.sh BINDIR [mlog]
set -u
BIN=$1
WHICH=${2:-cr}
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
N=6
HB=${PHX_HB_TIMEOUT:-1000}
export PHX_HB_TIMEOUT=$HB PHX_WORKERS=2
unset PHX_HB_PERIOD PHX_TD PHX_CKPT_DIE PHX_DRAIN_HOLD PHX_DRAIN_ON
ARGS="-N 256 -i 3000 -c 100"
AT=300
JOB_TIMEOUT=$((40 + 10 * HB / 1000))

ref=$("$BIN/jacobi" --seq $ARGS -P $N | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
[ -n "$ref" ] || { echo "FAIL - jacobi --seq printed no checksum"; exit 1; }
echo "reference checksum $ref"

# start NAME [ENV...] [-- PHX-FLAGS...]: launches the job (sets JOBPID, DIR).
start() {
    DIR=$TMP/$1; shift
    mkdir -p "$DIR"
    envs=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
    [ "${1:-}" = "--" ] && shift
    env "${envs[@]}" timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" --pidfile "$DIR/pids" "$BIN/jacobi" \
        --phx-ft=1 --phx-recovery="$REC" --phx-eventlog="$DIR/ev.%r.jsonl" "$@" $ARGS \
        >"$DIR/out" 2>"$DIR/err" &
    JOBPID=$!
    PIDS="$PIDS $JOBPID"
}
pid_of() { awk -v r="$1" '$1 == r { print $2 }' "$DIR/pids"; }
# at_iter ITER: the main task logged ITER and the pidfile is written.
at_iter() {
    wait_for "$JOB_TIMEOUT" logged "\"ev\":\"jacobi_iter\",\"iter\":$1}" &&
        wait_for 5 test -s "$DIR/pids"
}
finish_job() { wait "$JOBPID"; RC=$?; }
sum_of() { sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' "$DIR/out" | tail -1; }
none() { ! grep -qs "$1" "$DIR"/ev.*.jsonl; }

# race_case NAME LABEL: rank 5 dies while it stores the copy of the drain's
# checkpoint (PHX_CKPT_DIE=5:0:drain) and rank 3 asked to drain; the job
# still gives the reference, the failure is recovered and rank 3 drains after.
race_case() {
    start "$1" PHX_CKPT_DIE=5:0:drain
    if at_iter $AT; then
        kill -TERM "$(pid_of 3)"
        finish_job
        check "$2: exit code 0 (got $RC)" [ "$RC" = 0 ]
        check "$2: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
        check "$2: rank 5 died during the drain, recovered" grep -qs '"ev":"recovery_done"' "$DIR/ev.0.jsonl"
        check "$2: rank 3 drained after it, at every survivor" \
            [ "$(grep -ls '"ev":"drain_done","rank":3,' "$DIR"/ev.*.jsonl | wc -l)" = $((N - 1)) ]
        check "$2: rank 3 exited 0" grep -qs '"ev":"exit","code":0' "$DIR/ev.3.jsonl"
    else
        fail "$1: iteration $AT never logged"; finish_job
    fi
}

# drained NAME RANK: exit 0, the reference, RANK left by a drain at every
# survivor, exited 0, and nothing was declared, rolled back or redone.
drained() {
    check "$1: exit code 0 (got $RC)" [ "$RC" = 0 ]
    check "$1: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
    check "$1: rank $2 exited 0 after handing its tasks over" \
        grep -qs '"ev":"exit","code":0' "$DIR/ev.$2.jsonl"
    check "$1: rank $2 logged its drain" grep -qs '"ev":"drain_exit"' "$DIR/ev.$2.jsonl"
    check "$1: every survivor applied the drain of rank $2" \
        [ "$(grep -ls "\"ev\":\"drain_done\",\"rank\":$2," "$DIR"/ev.*.jsonl | wc -l)" = "$N" ]
    check "$1: rank $2's tasks moved to survivors at the cut" grep -qs "\"ev\":\"migrate_in\",.*\"from\":$2}" "$DIR"/ev.*.jsonl
    check "$1: no failure declared" none '"ev":"failure"'
    check "$1: no suspicion" none '"ev":"suspect"'
    check "$1: nobody rolled back (no work redone)" none '"ev":"rollback"'
    check "$1: no recovery round" none '"ev":"recovery_done"'
    check "$1: the launcher saw no signal death" eval '! grep -q "killed by signal\|different codes" "$DIR/err"'
}

REC=cr
if [ "$WHICH" = mlog ]; then
    # ---- message logging: SIGTERM to rank 3 mid-run ---------------------------------
    for REC in mlog-causal mlog-fast mlog-pessimistic; do
        if [ $REC = mlog-fast ]; then extra=-T; else extra=; fi
        start "term-$REC" -- $extra
        if at_iter $AT; then
            kill -TERM "$(pid_of 3)"
            finish_job
            drained "$REC SIGTERM rank 3" 3
            check "$REC SIGTERM rank 3: no partial restore, no replay, no fallback" eval \
                'none "\"ev\":\"partial_restore\"" && none "\"ev\":\"mlog_replay" && none "\"ev\":\"mlog_fallback\""'
            check "$REC SIGTERM rank 3: messages were logged (the mode was on)" \
                grep -qs '"ev":"mlog_gc"' "$DIR/ev.0.jsonl"
        else
            fail "term-$REC: iteration $AT never logged"; finish_job
        fi
    done

    # ---- mlog-causal: the coordinator (rank 0) drains ------------------------------
    REC=mlog-causal
    start coord-mlog
    if at_iter $AT; then
        kill -TERM "$(pid_of 0)"
        finish_job
        drained "mlog-causal SIGTERM rank 0 (coordinator)" 0
        check "mlog coord: no partial restore, no replay" eval \
            'none "\"ev\":\"partial_restore\"" && none "\"ev\":\"mlog_replay"'
    else
        fail "coord-mlog: iteration $AT never logged"; finish_job
    fi

    # ---- mlog-causal: a drain after a partial recovery ------------------------------
    # Rank 1 is killed; once its tasks were restored on the survivors and
    # replayed (a partial round, a hold on checkpoints until the replays
    # end), rank 3 gets SIGTERM and hands over what it holds, rank 1's
    # former tasks among them. The job's end waits on a gate until then.
    REC=mlog-causal
    GATE=$(gate_new rec-then-drain)
    start rec-then-drain -- -H 2900 -g "$GATE"
    if at_iter $AT; then
        p=$(pid_of 1)
        kill -9 "$p"
        gone "$p" $((JOB_TIMEOUT * 1000)) || fail "rec-then-drain: rank 1 outlived SIGKILL"
        wait_for "$JOB_TIMEOUT" logged '"ev":"mlog_replay_done"' || fail "rec-then-drain: no replay ended"
        kill -TERM "$(pid_of 3)"
        wait_for "$JOB_TIMEOUT" eval '[ "$(grep -ls "\"ev\":\"drain_done\",\"rank\":3," "$DIR"/ev.*.jsonl | wc -l)" = $((N - 1)) ]' ||
            fail "rec-then-drain: the drain of rank 3 never applied everywhere"
        gate_open "$GATE"
        finish_job
        check "rec-then-drain: exit code 0 (got $RC)" [ "$RC" = 0 ]
        check "rec-then-drain: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
        check "rec-then-drain: rank 1 recovered partially, nobody rolled back" eval \
            'logged "\"ev\":\"partial_restore\"" && none "\"ev\":\"rollback\""'
        check "rec-then-drain: rank 3 exited 0 after its drain" grep -qs '"ev":"drain_exit"' "$DIR/ev.3.jsonl"
    else
        fail "rec-then-drain: iteration $AT never logged"; gate_open "$GATE"; finish_job
    fi

    # ---- mlog-causal: a failure racing the drain (rank 5 dies storing its checkpoint) --
    # The checkpoint aborts. Its cut had moved tasks already, so the loss is
    # recovered by cr's global rollback (as for any failure during a
    # checkpoint that moves slices), rank 3 still a member; it drains after.
    REC=mlog-causal
    race_case race-mlog "mlog race"

    # ---- mlog-team refuses: SIGTERM stops the node, recovered as a crash -------------
    REC=mlog-team
    start team -- --phx-mlog-team-size=2
    if at_iter $AT; then
        kill -TERM "$(pid_of 3)"
        finish_job
        check "mlog-team: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
        check "mlog-team: rank 3 refused the drain, saying why" \
            grep -qs '"ev":"drain_refused","why":"mlog-team' "$DIR/ev.3.jsonl"
        check "mlog-team: rank 3 stopped (143) and the job says so (exit $RC)" [ "$RC" = 143 ]
        check "mlog-team: recovered as a crash" grep -qs '"ev":"recovery_done"' "$DIR"/ev.*.jsonl
    else
        fail "team: iteration $AT never logged"; finish_job
    fi

    # ---- a drain, then the node that took some of its slices is killed -------------
    for REC in mlog-causal mlog-fast mlog-pessimistic; do
    if [ $REC = mlog-fast ]; then extra=-T; else extra=; fi
    GATE=$(gate_new "after-$REC")
    start "after-$REC" -- $extra -H 600 -g "$GATE"
    if at_iter $AT; then
        kill -TERM "$(pid_of 3)"
        wait_for "$JOB_TIMEOUT" eval '[ "$(grep -ls "\"ev\":\"drain_done\",\"rank\":3," "$DIR"/ev.*.jsonl | wc -l)" = "$N" ]' ||
            fail "after $REC: the drain of rank 3 never applied everywhere"
        wait_for "$JOB_TIMEOUT" logged '"ev":"jacobi_hold"' || fail "after $REC: the hold never logged"
        # A node that rebuilt some of rank 3's slices at the drain's cut.
        adopter=$(grep -ls '"ev":"migrate_in",.*"tasks":[1-9][0-9]*,"from":3}' "$DIR"/ev.*.jsonl | sed 's/.*ev\.\([0-9]*\)\.jsonl/\1/' |
                  grep -vx 0 | head -1)
        if [ -n "$adopter" ] && [ "$adopter" != 0 ]; then
            p=$(pid_of "$adopter")
            kill -9 "$p"
            gone "$p" $((JOB_TIMEOUT * 1000)) || fail "after $REC: rank $adopter outlived SIGKILL"
            wait_for "$JOB_TIMEOUT" eval 'grep -qs "\"ev\":\"recovery_done\"" "$DIR/ev.0.jsonl" || ! kill -0 "$JOBPID" 2>/dev/null'
        else
            fail "after $REC: no node other than rank 0 took rank 3's slices (got '$adopter')"
        fi
        gate_open "$GATE"
        finish_job
        check "after $REC: exit code 0 (got $RC)" [ "$RC" = 0 ]
        check "after $REC: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
        check "after $REC: rank 3 drained (exit 0)" grep -qs '"ev":"exit","code":0' "$DIR/ev.3.jsonl"
        check "after $REC: rank $adopter's loss was recovered" grep -qs '"ev":"recovery_done"' "$DIR/ev.0.jsonl"
        check "after $REC: recovered partially (its tasks restored and replayed, nobody rolled back)" eval \
            'logged "\"ev\":\"partial_restore\"" && none "\"ev\":\"rollback\"" &&
             { [ $REC = mlog-fast ] || grep -hs "\"ev\":\"mlog_replay\"" "$DIR"/ev.*.jsonl | grep -q "\"dets_installed\":[1-9]"; }'
    else
        fail "after $REC: iteration $AT never logged"; gate_open "$GATE"; finish_job
    fi
    done
    finish
    exit $?
fi

# ---- SIGTERM to rank 3 mid-run ---------------------------------------------------
start term
if at_iter $AT; then
    kill -TERM "$(pid_of 3)"
    finish_job
    drained "SIGTERM rank 3" 3
    check "SIGTERM rank 3: one drain counted per survivor view (drain_plan at the coordinator)" \
        grep -qs '"ev":"drain_plan",.*"ranks":\[3\]' "$DIR/ev.0.jsonl"
else
    fail "term: iteration $AT never logged"; finish_job
fi

# ---- the coordinator (rank 0, main task) -------------------------------------------
start coord
if at_iter $AT; then
    kill -TERM "$(pid_of 0)"
    finish_job
    drained "SIGTERM rank 0 (coordinator)" 0
    check "coord: rank 1 coordinated the checkpoints after it" \
        grep -qs '"ev":"ckpt_commit"' "$DIR/ev.1.jsonl"
else
    fail "coord: iteration $AT never logged"; finish_job
fi

# ---- two at once, the coordinator one of them ------------------------------------------
# The next coordinator starts its first checkpoint (draining the other) as
# soon as it committed; that BEGIN and LEAVE may overtake the old
# coordinator's COMMIT at the others, who keep them for after it.
start pair
if at_iter $AT; then
    kill -TERM "$(pid_of 0)" "$(pid_of 3)"
    finish_job
    check "pair: exit code 0 (got $RC)" [ "$RC" = 0 ]
    check "pair: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
    for r in 0 3; do
        check "pair: rank $r exited 0 after its drain" \
            sh -c "grep -qs '\"ev\":\"drain_exit\"' '$DIR/ev.$r.jsonl' && grep -qs '\"ev\":\"exit\",\"code\":0' '$DIR/ev.$r.jsonl'"
    done
    check "pair: no failure declared" none '"ev":"failure"'
    check "pair: nobody rolled back" none '"ev":"rollback"'
else
    fail "pair: iteration $AT never logged"; finish_job
fi

# ---- phx drain of a rank still starting ------------------------------------------------
# A job directory made by hand: its "launcher" and its rank 2 are sleeps. While
# rank 2 is "starting" (spawned, not yet reported), phx drain waits for it;
# once the state says "up", it signals rank 2. A launcher gone ends the wait.
if [ "$WHICH" = cr ]; then
    jd=$TMP/jobdir; sleep 60 & fake_l=$!; sleep 60 & fake_n=$!; PIDS="$PIDS $fake_l $fake_n"
    mkdir -p "$jd/$fake_l"
    state() { printf '{"job":%d,"ranks":[{"rank":2,"host":"x","local":1,"pid":%d,"incarnation":1,"state":"%s"}]}\n' \
        "$fake_l" "$fake_n" "$1" >"$jd/$fake_l/state.json.tmp" && mv "$jd/$fake_l/state.json.tmp" "$jd/$fake_l/state.json"; }
    state starting
    "$PHX" drain 2 "$jd/$fake_l" >"$TMP/starting.out" 2>&1 & dpid=$!
    # A wait that ended wrongly would have signalled at once; this pause can
    # only let such a bug show, never make the checks below pass.
    sleep 0.3
    check "phx drain of a starting rank: still waiting, rank untouched" kill -0 "$dpid"
    check "phx drain of a starting rank: no signal sent yet" kill -0 "$fake_n"
    state up
    wait "$dpid"; drc=$?
    check "phx drain of a starting rank: exit 0 once it is up ($(cat "$TMP/starting.out"))" [ "$drc" = 0 ]
    wait "$fake_n" 2>/dev/null; nrc=$?
    check "phx drain of a starting rank: it got SIGTERM (status $nrc)" [ "$nrc" = 143 ]
    sleep 60 & fake_n=$!; PIDS="$PIDS $fake_n"; state starting
    "$PHX" drain 2 "$jd/$fake_l" >"$TMP/gone.out" 2>&1 & dpid=$!
    kill "$fake_l"; wait "$fake_l" 2>/dev/null
    wait "$dpid"; drc=$?
    check "phx drain of a starting rank whose launcher is gone: non-zero ($(cat "$TMP/gone.out"))" [ "$drc" != 0 ]
    kill "$fake_n" 2>/dev/null
fi

# ---- phx drain RANK --------------------------------------------------------------------
start cmd
if at_iter $AT; then
    node=$(pid_of 2)
    launcher=$(awk '{ print $4 }' "/proc/$node/stat")   # the node's parent: phx run
    "$PHX" drain 2 "$launcher" >"$DIR/drain.out" 2>&1; drc=$?
    check "phx drain 2 $launcher: exit 0 ($(cat "$DIR/drain.out"))" [ "$drc" = 0 ]
    finish_job
    drained "phx drain 2" 2
else
    fail "cmd: iteration $AT never logged"; finish_job
fi
"$PHX" drain 2 999999999 >/dev/null 2>&1
check "phx drain of a job that does not exist: non-zero" [ $? != 0 ]

# ---- the grace runs out: the drain never happens, SIGKILL follows ----------------------
start grace PHX_DRAIN_HOLD=3
if at_iter $AT; then
    kill -TERM "$(pid_of 3)"
    if wait_for "$JOB_TIMEOUT" grep -qs '"ev":"drain_held"' "$DIR/ev.3.jsonl"; then
        kill -9 "$(pid_of 3)"
    else
        fail "grace: rank 3 never logged its held drain"
    fi
    finish_job
    check "grace: exit code 0 (got $RC)" [ "$RC" = 0 ]
    check "grace: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
    check "grace: an ordinary recovery ran" grep -qs '"ev":"recovery_done"' "$DIR"/ev.*.jsonl
    check "grace: no drain was applied" none '"ev":"drain_done"'
else
    fail "grace: iteration $AT never logged"; finish_job
fi

# ---- a failure racing the drain: rank 5 dies storing the drain's checkpoint ----------
# (PHX_CKPT_DIE=5:0:drain). The checkpoint aborts, everyone rolls back as
# after any failure (rank 3, still a member, too), and the drain is planned
# again at the checkpoint the recovery round starts.
race_case race race

# ---- drain-on=off: SIGTERM is a crash, as before -----------------------------------------
start off -- --phx-drain-on=off
if at_iter $AT; then
    kill -TERM "$(pid_of 3)"
    finish_job
    check "off: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
    check "off: rank 3 stopped (143) and the job says so (exit $RC)" [ "$RC" = 143 ]
    check "off: recovered as a crash" grep -qs '"ev":"recovery_done"' "$DIR"/ev.*.jsonl
    check "off: no drain" none '"ev":"drain_request"'
else
    fail "off: iteration $AT never logged"; finish_job
fi

# ---- the whole job cancelled: phx run gets SIGTERM ------------------------------------
# The launcher stops nodes that may drain with SIGINT: they stop, none drains.
start cancel
if at_iter $AT; then
    t0=$(now_ms)
    launcher=$(awk '{ print $4 }' "/proc/$(pid_of 0)/stat")
    kill -TERM "$launcher"
    finish_job
    t1=$(now_ms)
    check "cancel: phx exits 143 (got $RC)" [ "$RC" = 143 ]
    check "cancel: within the launcher's grace ($((t1 - t0)) ms)" [ $((t1 - t0)) -lt 3000 ]
    check "cancel: no node drained" none '"ev":"drain_request"'
    check "cancel: no node had to be SIGKILLed" eval '! grep -q "sending SIGKILL" "$DIR/err"'
else
    fail "cancel: iteration $AT never logged"; finish_job
fi

# ---- every node gets SIGTERM at once (a scheduler cancelling the job) -------------
# The first requests may drain a node or two; once every live node asked,
# the coordinator ends the job (143) saying so: never a drain into nobody,
# never a hang, never a wrong result.
start all
if at_iter $AT; then
    t0=$(now_ms)
    kill -TERM $(awk '{ print $2 }' "$DIR/pids")
    finish_job
    t1=$(now_ms)
    check "all: the job ends non-zero, 143 (got $RC)" [ "$RC" = 143 ]
    check "all: promptly ($((t1 - t0)) ms, within 5 hb-timeouts: a checkpoint or two)" [ $((t1 - t0)) -lt $((5 * HB)) ]
    check "all: it says the job was cancelled" grep -q "the job is cancelled, not drained into nobody" "$DIR/err"
    check "all: no result printed" [ -z "$(sum_of)" ]
else
    fail "all: iteration $AT never logged"; finish_job
fi

finish
