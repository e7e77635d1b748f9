#!/bin/bash
# Message logging on 8 loopback nodes, 2 workers each, jacobi.
# Forward path: sender logs, determinants at every delivery (per-worker
# lock-free queues), causal trailers (or the pessimistic flush to the next
# live rank) and acks, logs emptied at each committed checkpoint.
# Recovery under mlog-causal: one kill restores only the dead node's tasks
# (spread over the survivors), survivors hand back dets and logged
# messages, the restored tasks replay in the recorded order, survivors drop
# the re-sent messages and never go back; a second failure, and any failure
# under mlog-pessimistic, falls back to cr's global rollback; a node lost
# with its buddy ends with 78. mlog-fast (jacobi -T): no determinants, the
# same recoveries, and a type not declared receive-deterministic refused.
# mlog-team (teams of 2): fewer messages logged than mlog-causal, and one
# kill rolls back exactly the dead node's team (cases at the end).
# Every result equals the fault-free checksum.
# Kills land between two checkpoints by construction: the app holds the
# checkpoint due after iteration (tick) H, and its end, on a gate file
# (-H H -g FILE); the test waits for the hold and for every node's last
# checkpoint to be committed, kills, waits for the victims to be gone and
# for rank 0's recovery round to end (or the job), then opens the gate.
# Usage: test_mlog.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
N=8
HB=$(hb_ms)
export PHX_HB_TIMEOUT=$HB PHX_WORKERS=2
unset PHX_HB_PERIOD PHX_TD PHX_CKPT_DIE
ARGS="-N 256 -i 2000 -c 100"
# Pessimistic logging waits a round trip per delivery: a shorter run.
ARGS_P="-N 128 -i 500 -c 50"
KILL_AT=350   # the kill cases: checkpoints every 100, the one at 400 held
JOB_TIMEOUT=$((60 + 10 * HB / 1000))

seqsum() { "$BIN/jacobi" --seq "$@" -P $N | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p'; }
ref_c=$(seqsum $ARGS)
ref_p=$(seqsum $ARGS_P)
[ -n "$ref_c" ] && [ -n "$ref_p" ] || { echo "FAIL - jacobi --seq printed no checksum"; exit 1; }
echo "reference checksums $ref_c (causal), $ref_p (pessimistic)"

start() {   # start NAME MODE [ARGS...]: the job in the background (JOBPID, DIR)
    DIR=$TMP/$1; mode=$2; shift 2
    mkdir -p "$DIR"
    timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" --pidfile "$DIR/pids" "$BIN/jacobi" \
        --phx-ft=1 --phx-recovery="$mode" --phx-eventlog="$DIR/ev.%r.jsonl" "$@" \
        >"$DIR/out" 2>"$DIR/err" &
    JOBPID=$!
}
# finish_job: waits (RC); a failed job shows the end of its stderr.
finish_job() {
    wait "$JOBPID"; RC=$?
    [ "$RC" = 0 ] || tail -8 "$DIR/err" | sed 's/^/  err: /'
}
sum_of() { sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' "$DIR/out" | tail -1; }
# every_node EVENT FIELD: each node's EVENT has FIELD > 0
every_node() {
    for r in $(seq 0 $((N - 1))); do
        grep -s "\"ev\":\"$1\"" "$DIR/ev.$r.jsonl" | grep -q "\"$2\":[1-9]" || return 1
    done
}

# every_ge1 EVENT FIELD: some node's EVENT has FIELD > 0
every_ge1() { grep -hs "\"ev\":\"$1\"" "$DIR"/ev.*.jsonl | grep -q "\"$2\":[1-9]"; }

for mode in mlog-causal mlog-pessimistic; do
    if [ $mode = mlog-causal ]; then a=$ARGS; ref=$ref_c; else a=$ARGS_P; ref=$ref_p; fi
    start "clean-$mode" "$mode" $a
    finish_job
    check "$mode fault-free: exit 0 (got $RC)" [ "$RC" = 0 ]
    check "$mode fault-free: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
    check "$mode: every node made determinants" every_node mlog_stats dets
    check "$mode: every node stored others' determinants" every_node mlog_stats dets_stored
    check "$mode: every node logged remote messages" every_node mlog_stats logged
    # The log fills during a period and each commit empties it:
    # the sizes seen at the commits add up to at most what was logged in
    # all (never emptied, they would add up to many times that).
    check "$mode: rank 0's log is emptied at every commit" python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
gc = [e["log_len"] for e in ev if e["ev"] == "mlog_gc"][1:]   # epoch 1: the job start
total = sum(e["logged"] for e in ev if e["ev"] == "mlog_stats")
ok = len(gc) >= 3 and max(gc) > 0 and sum(gc) <= total
if not ok:
    print("  log sizes at commits", gc, "logged in all", total)
sys.exit(not ok)' "$DIR/ev.0.jsonl"
done
check "mlog-pessimistic: app frames carried no determinants" eval \
    '! grep -h "\"ev\":\"mlog_stats\"" "$DIR"/ev.*.jsonl | grep -qv "\"piggybacked_on_app\":0"'

# kill_held NAME MIN RANK...: once the job logged its hold and MIN
# checkpoints settled, SIGKILL those ranks; once they are gone and the
# lowest live rank ended its recovery round (or the job ended), open the
# gate; wait.
kill_held() {
    name=$1; min=$2; shift 2
    wait_for "$JOB_TIMEOUT" logged '"ev":"[a-z]*_hold"' || fail "$name: the hold never logged"
    wait_for "$JOB_TIMEOUT" settled "$min" || fail "$name: checkpoints never settled"
    wait_for 5 test -s "$DIR/pids"
    p=""
    for r in "$@"; do p="$p $(awk -v r="$r" '$1 == r { print $2 }' "$DIR/pids")"; done
    kill -9 $p
    for x in $p; do gone "$x" $((JOB_TIMEOUT * 1000)) || fail "$name: rank pid $x outlived SIGKILL"; done
    w=0; while [[ " $* " == *" $w "* ]]; do w=$((w + 1)); done   # a live rank's log
    wait_for "$JOB_TIMEOUT" eval 'grep -qs "\"ev\":\"recovery_done\"" "$DIR/ev.$w.jsonl" || ! kill -0 "$JOBPID" 2>/dev/null'
    gate_open "$GATE"
    finish_job
}
# kill_job NAME MODE RANK...: the checkpoint after iteration KILL_AT is
# held; kill those ranks after the one before it committed.
kill_job() {
    name=$1; mode=$2; shift 2
    GATE=$(gate_new "$name")
    start "$name" "$mode" $ARGS -H $KILL_AT -g "$GATE"
    kill_held "$name" 2 "$@"
}
# monotone: in every node's log, each block's iterations only go up (a
# survivor never rolls back; a restored block starts anew on its new host).
monotone() {
    python3 - "$DIR" "$N" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
for r in range(n):
    try:
        lines = open("%s/ev.%d.jsonl" % (d, r))
    except OSError:
        continue
    last = {}
    for l in lines:
        e = json.loads(l)
        if e["ev"] != "jacobi_blk":
            continue
        if e["iter"] <= last.get(e["blk"], 0):
            print("  rank %d block %d went back from %d to %d" % (r, e["blk"], last[e["blk"]], e["iter"]))
            sys.exit(1)
        last[e["blk"]] = e["iter"]
PY
}
ref=$ref_c
# two_partial MODE WHAT: the job that lost ranks 1 and 5 ended right, one
# partial round restored both from their buddies, nobody rolled back.
two_partial() {
    check "$1 $2: exit 0 (got $RC), checksum $(sum_of) equals the reference" eval \
        '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
    check "$1 two kills: one partial round restored both, no rollback anywhere" eval \
        'logged "\"ev\":\"mlog_partial_multi\"" && logged "\"source\":\"buddy\",\"of\":1," &&
         logged "\"source\":\"buddy\",\"of\":5," && ! logged "\"ev\":\"rollback\"" && ! logged "\"ev\":\"mlog_fallback\""'
    check "$1 two kills: no block ever went back on any node" monotone
}

# ---- parallel recovery: only the dead node's tasks restart -------------------
kill_job kill mlog-causal 3
check "mlog-causal one kill: exit 0 (got $RC)" [ "$RC" = 0 ]
check "mlog-causal one kill: checksum $(sum_of) equals the reference $ref" [ "$(sum_of)" = "$ref" ]
check "mlog-causal one kill: a partial restore, no rollback anywhere" eval \
    'logged "\"ev\":\"partial_restore\"" && ! logged "\"ev\":\"rollback\""'
check "mlog-causal one kill: only rank 3's tasks were restored" eval \
    'logged "\"source\":\"buddy\",\"of\":3," && ! logged "\"source\":\"local\""'
hosts=$(grep -ls '"ev":"restore","tasks":[1-9][0-9]*,"source":"buddy","of":3,' "$DIR"/ev.*.jsonl | wc -l)
check "mlog-causal one kill: its tasks spread over several survivors ($hosts)" [ "$hosts" -ge 2 ]
check "mlog-causal one kill: survivors handed back logged messages" every_ge1 mlog_handback msgs
check "mlog-causal one kill: replays followed installed determinants" every_ge1 mlog_replay dets_installed
check "mlog-causal one kill: survivors dropped re-sent messages as duplicates" every_ge1 mlog_recovery dups
check "mlog-causal one kill: no block ever went back on any node" monotone
# The control: under cr the same kill makes every survivor reload its own
# copy (the events the mlog run must not have).
kill_job cr-kill cr 3
locals=$(grep -ls '"source":"local"' "$DIR"/ev.*.jsonl | wc -l)
check "cr one kill (control): checksum right, all 7 survivors reloaded ($locals)" eval \
    '[ "$(sum_of)" = "$ref" ] && [ "$locals" = 7 ]'

# ---- recovery-helpers=2: rank 3's tasks go to its buddy and the next rank -----
ARGS_SAVE=$ARGS; ARGS="$ARGS -V 8 --phx-recovery-helpers=2"
ref_v8=$(seqsum $ARGS_SAVE -V 8)
kill_job helpers mlog-causal 3
ARGS=$ARGS_SAVE
check "mlog-causal, recovery-helpers=2, one kill: exit 0 (got $RC), checksum equals the reference" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref_v8" ]'
check "mlog-causal, recovery-helpers=2: a partial restore, no rollback anywhere" eval \
    'logged "\"ev\":\"partial_restore\"" && ! logged "\"ev\":\"rollback\""'
# The buddy logs its restore without "via"; the other helper is the next
# live rank after it. Both host some of rank 3's 8 blocks, nobody else does.
check "mlog-causal, recovery-helpers=2: rank 3's 8 tasks restored on its buddy and the next rank only" \
    python3 - "$DIR" "$N" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
got, buddy = {}, None
for r in range(n):
    try:
        lines = open("%s/ev.%d.jsonl" % (d, r)).readlines()
    except OSError:
        continue
    for l in lines:
        e = json.loads(l)
        if e["ev"] == "restore" and e.get("of") == 3:
            got[r] = got.get(r, 0) + e["tasks"]
            if "via" not in e:
                buddy = r
want = {buddy, (buddy + 1) % n if (buddy + 1) % n != 3 else (buddy + 2) % n} if buddy is not None else set()
ok = set(got) == want and len(want) == 2 and all(got[r] > 0 for r in got) and sum(got.values()) == 8
if not ok:
    print("  restored tasks of rank 3 per host", got, "buddy", buddy, "expected hosts", sorted(want))
sys.exit(not ok)
PY
check "mlog-causal, recovery-helpers=2: no block ever went back on any node" monotone
# Negative is refused at startup, naming the key.
timeout -k 5 60 "$PHX" run -n 2 "$BIN/jacobi" --phx-ft=1 --phx-recovery=mlog-causal --phx-recovery-helpers=-1 \
    -N 64 -i 10 >"$TMP/out" 2>"$TMP/err"
rc=$?
check "recovery-helpers=-1 is refused (exit $rc)" eval \
    '[ $rc = 2 ] && grep -q "bad value .-1. for option recovery-helpers.*expected a whole number of nodes >= 0" "$TMP/err"'

# ---- order-sensitive app: racing senders, hash chains, routes by hash ------------
# (apps/order: main checks that every sender's stream equals what its
# receiver used; an orphan after a wrong replay makes it exit 3.)
# -c 0: no application checkpoint, so the replay runs from the job's start
# and re-spawns the dead node's tasks; -c 50: from a recent checkpoint.
# -L 1: START passes along a line of tasks, so most tasks get tokens before
# START (kept until it comes; a replay must keep them in the same order).
for c in "0" "50" "0 -L 1"; do
    DIR=$TMP/order-${c// /}; mkdir -p "$DIR"
    GATE=$(gate_new "order-${c// /}")
    timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" --pidfile "$DIR/pids" "$BIN/order" --phx-ft=1 \
        --phx-recovery=mlog-causal --phx-eventlog="$DIR/ev.%r.jsonl" -k 400 -c $c -H 120 -g "$GATE" \
        >"$DIR/out" 2>"$DIR/err" &
    JOBPID=$!
    if [ "${c%% *}" = 0 ]; then min=1; else min=2; fi
    kill_held "order -c $c" $min 3
    check "order -c $c, one kill: exit 0 and consistent (got $RC)" eval \
        '[ "$RC" = 0 ] && grep -q "consistent=yes" "$DIR/out"'
    check "order -c $c, one kill: replayed by determinants, no rollback" eval \
        'every_ge1 mlog_replay dets_installed && ! logged "\"ev\":\"rollback\""'
done

# ---- fallbacks ----------------------------------------------------------------
ARGS_SAVE=$ARGS; ARGS=$ARGS_P; ref=$ref_p; KILL_AT=75
kill_job pkill mlog-pessimistic 3
check "mlog-pessimistic one kill: exit 0, checksum equals the reference" eval '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "mlog-pessimistic one kill: partial restore and replay, no rollback" eval \
    'logged "\"ev\":\"partial_restore\"" && ! logged "\"ev\":\"rollback\"" && every_ge1 mlog_replay dets_installed'
check "mlog-pessimistic one kill: no block ever went back on any node" monotone
# Two at once, neither the other's det store (2 stores 1's dets, 6 stores
# 5's: ft/mlog/multi.h): both restored from their buddies in one partial
# round, by the dets the survivors hold; nobody rolls back.
kill_job ptwo mlog-pessimistic 1 5
two_partial mlog-pessimistic "two kills at once (1, 5)"
check "mlog-pessimistic two kills: replays followed installed determinants" every_ge1 mlog_replay dets_installed
# The order-sensitive app (a replay in another order makes it exit 3; with
# PHX_MLOG_TEST_NO_DETS=1 this case exits 3 or 1).
DIR=$TMP/order-ptwo; mkdir -p "$DIR"
GATE=$(gate_new order-ptwo)
timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" --pidfile "$DIR/pids" "$BIN/order" --phx-ft=1 \
    --phx-recovery=mlog-pessimistic --phx-eventlog="$DIR/ev.%r.jsonl" -k 400 -c 50 -H 120 -g "$GATE" \
    >"$DIR/out" 2>"$DIR/err" &
JOBPID=$!
kill_held "order mlog-pessimistic two kills" 2 1 5
check "order mlog-pessimistic, two kills at once (1, 5): exit 0 and consistent (got $RC), partial by dets" eval \
    '[ "$RC" = 0 ] && grep -q "consistent=yes" "$DIR/out" && logged mlog_partial_multi &&
     every_ge1 mlog_replay dets_installed && ! logged "\"ev\":\"rollback\""'
ARGS=$ARGS_SAVE; ref=$ref_c; KILL_AT=350
# mlog-causal (k = 1): a det acked by the other victim alone may be needed
# by a survivor, so the rule rolls back globally.
kill_job two mlog-causal 1 5
check "mlog-causal two kills at once (1, 5): exit 0, checksum equals the reference" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "mlog-causal two kills: the rule fell back to the global rollback" eval \
    'logged "\"ev\":\"mlog_fallback\"" && logged "\"ev\":\"rollback\"" && ! logged "\"ev\":\"partial_restore\""'
# A second failure while the first one's replay is under way: every node's
# release waits for RGATE (PHX_MLOG_TEST_HOLD_RELEASE), so the restored
# tasks are still replaying when cr asks for the checkpoint that re-doubles
# the moved state (end of the partial round) and when rank 1 is killed.
# The global rollback must find a consistent checkpoint (one taken before
# the replay, not during it: the "malformed wire data" / residual
# window / wrong checksum), and the void replay's records must not hold the
# restored tasks for ever: RGATE is never opened, as a release that never
# comes (phx_mlog_drop_replays in core/mlog_replay.c; without it the job hangs).
# rb_asked: rank 0 logged, after its partial round, a checkpoint committed
# or one held back; with settled, no checkpoint is half done anywhere.
rb_asked() {
    awk '/"ev":"recovery_done"/ { r = 1 } r && /"ev":"ckpt_(commit|held)"/ { f = 1 } END { exit !f }' "$DIR/ev.0.jsonl"
}
# replay_holds: every survivor but rank 3 logged its held release.
replay_holds() {
    [ "$(grep -ls '"ev":"mlog_release_held"' "$DIR"/ev.*.jsonl | wc -l)" = $((N - 1)) ]
}
# no_commit_in_replay: on no node a checkpoint was committed between the
# partial restore and the end of the replay (or the global rollback).
no_commit_in_replay() {
    for f in "$DIR"/ev.*.jsonl; do
        awk '/"ev":"partial_restore"/ { p = 1 } /"ev":"(rollback|mlog_replay_done)"/ { p = 0 }
             p && /"ev":"ckpt_commit"/ { bad = 1 } END { exit bad }' "$f" || { echo "  a commit in $f"; return 1; }
    done
}
# held_case NAME MODE ARGS...: kill 3, hold its replay open, kill 1.
held_case() {
    local name=$1 mode=$2 p1 p3
    shift 2
    GATE=$(gate_new "$name"); RGATE=$(gate_new "$name-release")
    export PHX_MLOG_TEST_HOLD_RELEASE=$RGATE
    start "$name" "$mode" "$@" -H $KILL_AT -g "$GATE"
    unset PHX_MLOG_TEST_HOLD_RELEASE
    wait_for "$JOB_TIMEOUT" logged '"ev":"jacobi_hold"' || fail "$name: the hold never logged"
    wait_for "$JOB_TIMEOUT" settled 2 || fail "$name: checkpoints never settled"
    wait_for 5 test -s "$DIR/pids"
    p3=$(awk '$1 == 3 { print $2 }' "$DIR/pids"); p1=$(awk '$1 == 1 { print $2 }' "$DIR/pids")
    kill -9 "$p3"
    gone "$p3" $((JOB_TIMEOUT * 1000)) || fail "$name: rank 3 outlived SIGKILL"
    wait_for "$JOB_TIMEOUT" replay_holds || fail "$name: the survivors never held their release"
    wait_for "$JOB_TIMEOUT" eval 'rb_asked && settled 2' || fail "$name: no checkpoint asked for after the partial round"
    kill -9 "$p1"
    gone "$p1" $((JOB_TIMEOUT * 1000)) || fail "$name: rank 1 outlived SIGKILL"
    wait_for "$JOB_TIMEOUT" eval 'grep -qs "\"ev\":\"recovery_done\".*\"round\":2" "$DIR/ev.0.jsonl" || ! kill -0 "$JOBPID" 2>/dev/null'
    # RGATE stays shut after a global rollback (a void replay's release must
    # not be needed); OPEN_RGATE=1 opens it (a sequential partial round
    # releases both rounds' replays then), after GATE: the held replays keep
    # the job from its end until then, so the checkpoint GATE lets go is
    # asked for (at a residual) and commits once they ended, before the end.
    gate_open "$GATE"
    [ "${OPEN_RGATE:-0}" = 1 ] && gate_open "$RGATE"
    finish_job
}
held_case held mlog-causal $ARGS
check "mlog-causal kill 3, kill 1 during its replay: exit 0 (got $RC), checksum $(sum_of) equals the reference" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "mlog-causal kill 1 during the replay: it fell back to the global rollback" eval \
    'logged "\"ev\":\"mlog_fallback\"" && logged "\"ev\":\"rollback\""'
check "mlog-causal kill 1 during the replay: no checkpoint committed while the replay was under way" no_commit_in_replay
# The same under mlog-pessimistic: 1 and 3 are not each other's det store
# and rank 3's round ended on every live rank (its replay is under way), so
# ft/mlog/multi.h's rule recovers rank 1 partially too (a sequential round:
# rank 1's tasks and those of rank 3 that the first round put on rank 1
# come from their buddies' copies; rank 3's others keep replaying).
KILL_AT=75; OPEN_RGATE=1 held_case pheld mlog-pessimistic $ARGS_P; KILL_AT=350
check "mlog-pessimistic kill 3, kill 1 during its replay: exit 0 (got $RC), checksum $(sum_of) equals the reference" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref_p" ]'
check "mlog-pessimistic kill 1 during the replay: a sequential partial round, no rollback anywhere" eval \
    'logged "\"ev\":\"mlog_partial_multi\",\"failures\":2,\"sequential\":1" &&
     [ "$(grep -c "\"ev\":\"partial_restore\"" "$DIR/ev.0.jsonl")" = 2 ] && logged "\"source\":\"buddy\",\"of\":1," &&
     ! logged "\"ev\":\"rollback\"" && ! logged "\"ev\":\"mlog_fallback\""'
check "mlog-pessimistic kill 1 during the replay: no checkpoint committed while a replay was under way" no_commit_in_replay
check "mlog-pessimistic kill 1 during the replay: no block ever went back on any node" monotone
check "mlog-pessimistic kill 1 during the replay: both rounds' replays ended on every live node, then a commit began a new period" eval \
    '[ "$(grep -ls "\"ev\":\"mlog_replay_done\"" "$DIR"/ev.*.jsonl | wc -l)" = $((N - 2)) ] &&
     grep -qs "\"ev\":\"mlog_period\".*\"failures\":2,\"global\":0" "$DIR/ev.0.jsonl"'
# The same schedule on the order-sensitive app (with PHX_MLOG_TEST_NO_DETS=1
# it exits 3: the sequential round's replays need the dets handed back).
DIR=$TMP/order-pseq; mkdir -p "$DIR"
GATE=$(gate_new order-pseq); RGATE=$(gate_new order-pseq-release)
PHX_MLOG_TEST_HOLD_RELEASE=$RGATE timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" --pidfile "$DIR/pids" "$BIN/order" \
    --phx-ft=1 --phx-recovery=mlog-pessimistic --phx-eventlog="$DIR/ev.%r.jsonl" -k 400 -c 50 -H 120 -g "$GATE" \
    >"$DIR/out" 2>"$DIR/err" &
JOBPID=$!
wait_for "$JOB_TIMEOUT" logged '"ev":"order_hold"' || fail "order-pseq: the hold never logged"
wait_for "$JOB_TIMEOUT" settled 2 || fail "order-pseq: checkpoints never settled"
wait_for 5 test -s "$DIR/pids"
p3=$(awk '$1 == 3 { print $2 }' "$DIR/pids"); p1=$(awk '$1 == 1 { print $2 }' "$DIR/pids")
kill -9 "$p3"
gone "$p3" $((JOB_TIMEOUT * 1000)) || fail "order-pseq: rank 3 outlived SIGKILL"
wait_for "$JOB_TIMEOUT" replay_holds || fail "order-pseq: the survivors never held their release"
kill -9 "$p1"
gone "$p1" $((JOB_TIMEOUT * 1000)) || fail "order-pseq: rank 1 outlived SIGKILL"
wait_for "$JOB_TIMEOUT" eval 'grep -qs "\"ev\":\"recovery_done\".*\"round\":2" "$DIR/ev.0.jsonl" || ! kill -0 "$JOBPID" 2>/dev/null'
gate_open "$RGATE"; gate_open "$GATE"
finish_job
check "order mlog-pessimistic, kill 1 during rank 3's replay: exit 0 and consistent (got $RC), a sequential partial round" eval \
    '[ "$RC" = 0 ] && grep -q "consistent=yes" "$DIR/out" && logged "\"sequential\":1" && ! logged "\"ev\":\"rollback\""'
kill_job pair mlog-causal 3 4
check "mlog-causal node + buddy (3, 4): exit 78 naming both, no checksum" eval \
    '[ "$RC" = 78 ] && grep -qs "rank 3 and its buddy rank 4 both died" "$DIR/err" && [ -z "$(sum_of)" ]'

# ---- mlog-fast: no determinants; jacobi -T (tagged, receive-deterministic) ----
# Restored tasks take survivors' re-sent messages in any order; their tag
# boxes and the SSN streams drop what was delivered before.
start clean-fast mlog-fast $ARGS -T
finish_job
check "mlog-fast fault-free: exit 0, checksum $(sum_of) equals the reference $ref" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "mlog-fast: every node logged remote messages" every_node mlog_stats logged
check "mlog-fast: no determinant made, stored or carried anywhere" eval \
    '! grep -h "\"ev\":\"mlog_stats\"" "$DIR"/ev.*.jsonl | grep -v "\"dets\":0,.*\"dets_stored\":0,.*\"piggybacked_on_app\":0"'
ARGS_SAVE=$ARGS; ARGS="$ARGS -T"
kill_job fkill mlog-fast 3
check "mlog-fast one kill: exit 0 (got $RC), checksum $(sum_of) equals the reference" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "mlog-fast one kill: a partial restore of rank 3's tasks, no rollback anywhere" eval \
    'logged "\"ev\":\"partial_restore\"" && ! logged "\"ev\":\"rollback\"" && logged "\"source\":\"buddy\",\"of\":3,"'
check "mlog-fast one kill: survivors handed back logged messages, no determinants" eval \
    'every_ge1 mlog_handback msgs && ! every_ge1 mlog_handback dets'
check "mlog-fast one kill: survivors dropped re-sent messages as duplicates" every_ge1 mlog_recovery dups
check "mlog-fast one kill: no block ever went back on any node" monotone
# Two at once (not buddies): one partial round restores both from their
# buddies; what 1 had logged for 5 (and back) their replays send again.
kill_job ftwo mlog-fast 1 5
two_partial mlog-fast "two kills at once (1, 5; not buddies)"
check "mlog-fast two kills: survivors handed back logged messages" every_ge1 mlog_handback msgs
# The rule would recover a node + buddy under mlog-fast, but the copy is gone.
kill_job fpair mlog-fast 3 4
check "mlog-fast node + buddy (3, 4): exit 78 naming both, no checksum (got $RC)" eval \
    '[ "$RC" = 78 ] && grep -qs "rank 3 and its buddy rank 4 both died" "$DIR/err" && [ -z "$(sum_of)" ]'
# Rank 0 hosts the main task: restored at the checkpoint, it gets the
# survivors' logged residuals of every later iteration back in any order
# (campaign seed jacobi/mlog-fast/random:1020375844 exited 1 on it).
kill_job fmain mlog-fast 0
check "mlog-fast kill of rank 0 (the main task): exit 0 (got $RC), checksum $(sum_of) equals the reference" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ] && logged "\"source\":\"buddy\",\"of\":0,"'
ARGS=$ARGS_SAVE
# Never a wrong answer: a type not declared receive-deterministic is refused.
timeout -k 5 60 "$PHX" run -n 2 "$BIN/jacobi" --phx-ft=1 --phx-recovery=mlog-fast -N 64 -i 10 >"$TMP/out" 2>"$TMP/err"
rc=$?
check "mlog-fast refuses jacobi without -T (exit $rc)" eval \
    '[ $rc = 2 ] && grep -q "mlog-fast needs receive-deterministic task types; type .jacobi_block." "$TMP/err"'

# A typo is refused and the valid names are listed.
timeout -k 5 60 "$PHX" run -n 2 "$BIN/jacobi" --phx-ft=1 --phx-recovery=mlog-bogus -N 64 -i 10 >"$TMP/out" 2>"$TMP/err"
rc=$?
check "an unknown mode lists the mlog ones" eval \
    '[ $rc = 2 ] && grep -q "bad value .mlog-bogus. for option recovery .*expected none, cr, mlog-causal, mlog-pessimistic, mlog-fast or mlog-team" "$TMP/err"'
# ---- mlog-team (Ch. 5): teams of 2 consecutive ranks, {0,1} {2,3} ... ---------
# Only messages between teams are logged; every delivery still makes a det.
# A kill of rank 3 rolls back exactly its team: rank 2 reloads its own copy
# and replays its own record, rank 3's tasks come from its buddy (rank 4,
# outside the team), the other six nodes keep running and hand back.
export PHX_MLOG_TEAM_SIZE=2   # the environment form of --phx-mlog-team-size
# logged_sum DIR: messages logged by all nodes (mlog_stats)
logged_sum() {
    cat "$1"/ev.*.jsonl | sed -n 's/.*"ev":"mlog_stats".*"logged":\([0-9]*\),.*/\1/p' | awk '{s += $1} END {print s + 0}'
}
# team_only RANK...: exactly these ranks rolled back (team_rollback, a local
# reload), none globally; every other node's blocks only went forward, and
# each listed rank's first progress after its rollback is not past where it
# was (no progress logged before the job ended is allowed).
team_only() {
    python3 - "$DIR" "$N" "$@" <<'PY'
import json, sys
d, n, team = sys.argv[1], int(sys.argv[2]), set(int(x) for x in sys.argv[3:])
ok = True
for r in range(n):
    try:
        ev = [json.loads(l) for l in open("%s/ev.%d.jsonl" % (d, r))]
    except OSError:
        continue
    names = [e["ev"] for e in ev]
    if "rollback" in names:
        print("  rank %d rolled back globally" % r); ok = False
    rolled = "team_rollback" in names or any(e["ev"] == "restore" and e.get("source") == "local" for e in ev)
    if rolled != (r in team):
        print("  rank %d: rolled back %s, expected %s" % (r, rolled, r in team)); ok = False
    # A team-mate's re-execution shows only if it logs progress before the
    # job ends: the kill lands once every block may have reached the end
    # (only the app's end is held), and the job ends as soon as rank 0 has
    # every result, so "went back" is required only where it logged again.
    last, seen_after, rolled_at = {}, set(), None
    for e in ev:
        if e["ev"] == "team_rollback":
            rolled_at = dict(last)
        if e["ev"] != "jacobi_blk":
            continue
        b, it = e["blk"], e["iter"]
        if r not in team and it <= last.get(b, 0):
            print("  rank %d (outside the team) block %d went back from %d to %d" % (r, b, last[b], it)); ok = False
        if r in team and rolled_at is not None and b in rolled_at and b not in seen_after:
            seen_after.add(b)   # its first progress after the rollback
            if it > rolled_at[b]:
                print("  rank %d (team-mate) block %d went on from %d to %d past its rollback" % (r, b, rolled_at[b], it)); ok = False
        last[b] = it
sys.exit(not ok)
PY
}
causal_logged=$(logged_sum "$TMP/clean-mlog-causal")
start clean-team mlog-team $ARGS
finish_job
team_logged=$(logged_sum "$DIR")
check "mlog-team fault-free: exit 0 (got $RC), checksum $(sum_of) equals the reference $ref" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "mlog-team: every node made determinants and left intra-team messages unlogged" eval \
    'every_node mlog_stats dets && every_node mlog_stats unlogged_team'
check "mlog-team: fewer messages logged than mlog-causal ($team_logged < $causal_logged)" \
    [ "$team_logged" -gt 0 -a "$team_logged" -lt "$causal_logged" ]
kill_job team-kill mlog-team 3
check "mlog-team one kill (3): exit 0 (got $RC), checksum $(sum_of) equals the reference $ref" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "mlog-team one kill: rank 3's tasks from its buddy, a partial round" eval \
    'logged "\"ev\":\"partial_restore\"" && logged "\"source\":\"buddy\",\"of\":3,"'
check "mlog-team one kill: only team {2,3} rolled back; the others never went back" team_only 2
check "mlog-team one kill: rank 2 replayed its own determinants" eval \
    'grep -s "\"ev\":\"mlog_team_rollback\"" "$DIR/ev.2.jsonl" | grep -q "\"own_dets\":[1-9]"'
check "mlog-team one kill: survivors outside the team handed back logged messages" every_ge1 mlog_handback msgs
# Rank 2's buddy is rank 3, in its team: one failure still leaves it alive.
kill_job team-kill2 mlog-team 2
check "mlog-team kill of 2 (buddy 3 in its team): exit 0 (got $RC), checksum equals the reference" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "mlog-team kill of 2: only team {2,3} rolled back" team_only 3
# A team of the whole job: nothing is logged, so cr's global rollback.
PHX_MLOG_TEAM_SIZE=8 kill_job team-all mlog-team 3
check "mlog-team, one team of 8, one kill: global rollback, checksum equals the reference (got $RC)" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ] && logged "\"ev\":\"rollback\"" && ! logged "\"ev\":\"team_rollback\""'
# The order-sensitive app: a replay in the wrong order makes it exit 3.
DIR=$TMP/order-team; mkdir -p "$DIR"
GATE=$(gate_new order-team)
timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" --pidfile "$DIR/pids" "$BIN/order" --phx-ft=1 \
    --phx-recovery=mlog-team --phx-eventlog="$DIR/ev.%r.jsonl" -k 400 -c 50 -H 120 -g "$GATE" \
    >"$DIR/out" 2>"$DIR/err" &
JOBPID=$!
kill_held "order mlog-team" 2 3
check "order mlog-team, one kill: exit 0 and consistent (got $RC)" eval \
    '[ "$RC" = 0 ] && grep -q "consistent=yes" "$DIR/out"'
check "order mlog-team, one kill: only team {2,3} rolled back, by determinants" eval \
    'team_only 2 && every_ge1 mlog_replay dets_installed'
timeout -k 5 60 "$PHX" run -n 2 "$BIN/jacobi" --phx-ft=1 --phx-recovery=mlog-team --phx-mlog-team-size=0 \
    -N 64 -i 10 >"$TMP/out" 2>"$TMP/err"
rc=$?
check "mlog-team-size=0 is refused (exit $rc)" eval '[ $rc = 2 ] && grep -q "mlog-team-size" "$TMP/err"'
# Beyond one failure: as mlog-causal (global rollback; node + buddy: 78).
kill_job team-two mlog-team 1 5
check "mlog-team two kills at once (1, 5): exit 0 (got $RC), checksum equals the reference" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref" ]'
check "mlog-team two kills: the second fell back to the global rollback" logged '"ev":"mlog_fallback"'
kill_job team-pair mlog-team 3 4
check "mlog-team node + buddy (3, 4): exit 78, no checksum (got $RC)" eval '[ "$RC" = 78 ] && [ -z "$(sum_of)" ]'
unset PHX_MLOG_TEAM_SIZE

# ---- one kill per checkpoint interval over 10 intervals (12 nodes) -------------
# Kill j (ranks 11, 10, ..., 2; rank 0 keeps the main task) lands once the
# job passed iteration 200 + 400j and every live node committed a
# checkpoint after its j-th recovery: the re-doubling one, which under mlog
# waits for every replay, so the moved tasks are stored twice and the logs
# were collected. The app's own checkpoints after iteration 100 and its end
# are held on the gate (opened after the last kill), so no checkpoint is
# under way at a kill and each kill is the first of its checkpoint period.
# Each failure is detected by the heartbeat timeout (the killed rank's links
# are retried first), so the ten take 10 timeouts (~40 s in all at
# PHX_HB_TIMEOUT=3000); the blocks, slower with each kill (fewer nodes),
# are still running at the last one on an idle machine (else a kill finds
# them done and waiting at the gate: still a recovery, an easier one).
# The same schedule under recovery=cr (global rollbacks) runs only with
# PHX_IT_LONG=1 (another ~40 s).
N_SAVE=$N; N=12; JT_SAVE=$JOB_TIMEOUT
JOB_TIMEOUT=$((90 + 20 * HB / 1000))   # ten detections on top of the run
ARGS10="-N 256 -i 6000 -c 100"
ref10=$(seqsum $ARGS10)
# period_settled J: every live rank recovered J times and committed since.
period_settled() {
    local r f
    for r in $(seq 0 $((N - 1))); do
        case " $killed " in *" $r "*) continue ;; esac
        f=$DIR/ev.$r.jsonl
        [ "$(grep -Eo '"ev":"(ckpt_begin|ckpt_commit|recovery_done)"' "$f" 2>/dev/null | tail -1)" = \
            '"ev":"ckpt_commit"' ] && [ "$(grep -c '"ev":"recovery_done"' "$f")" -ge "$1" ] || return 1
    done
}
ten_kills() {   # ten_kills NAME MODE [RANKS]
    local kr kp j=0
    GATE=$(gate_new "$1")
    start "$1" "$2" $ARGS10 -H 100 -g "$GATE"
    killed=""
    for kr in ${3:-11 10 9 8 7 6 5 4 3 2}; do
        wait_for "$JOB_TIMEOUT" logged "\"ev\":\"jacobi_iter\",\"iter\":$((200 + 400 * j))}" ||
            { fail "$1: iteration $((200 + 400 * j)) never logged"; break; }
        wait_for "$JOB_TIMEOUT" period_settled $j || { fail "$1: no commit after recovery $j"; break; }
        wait_for 5 test -s "$DIR/pids"
        kp=$(awk -v r="$kr" '$1 == r { print $2 }' "$DIR/pids")
        kill -9 "$kp"
        gone "$kp" $((JOB_TIMEOUT * 1000)) || fail "$1: rank $kr (pid $kp) outlived SIGKILL"
        killed="$killed $kr"; j=$((j + 1))
        wait_for "$JOB_TIMEOUT" eval '[ "$(grep -cs "\"ev\":\"recovery_done\"" "$DIR/ev.0.jsonl")" -ge $j ] ||
            ! kill -0 "$JOBPID" 2>/dev/null' || { fail "$1: recovery $j never ended"; break; }
    done
    gate_open "$GATE"
    finish_job
}
t0=$(now_ms)
ten_kills ten mlog-causal
echo "ten kills under mlog-causal: $(( ($(now_ms) - t0) / 1000 )) s; the blocks were $(python3 - "$DIR/ev.0.jsonl" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
last = max((e["t"] for e in ev if e["ev"] == "failure"), default=0)
end = max((e["t"] for e in ev if e["ev"] == "jacobi_iter"), default=0)
print("still running" if end > last else "done", end="")
PY
) at the last kill"
check "mlog-causal, 10 kills, one per checkpoint interval: exit 0 (got $RC), checksum $(sum_of) equals $ref10" eval \
    '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref10" ]'
np=$(grep -c '"ev":"partial_restore"' "$DIR/ev.0.jsonl")
check "mlog-causal, 10 kills: all 10 recoveries partial ($np on rank 0), no rollback anywhere" eval \
    '[ "$np" = 10 ] && ! logged "\"ev\":\"rollback\"" && ! logged "\"ev\":\"mlog_fallback\""'
check "mlog-causal, 10 kills: a new checkpoint period after each recovery" eval \
    '[ "$(grep -c "\"ev\":\"mlog_period\"" "$DIR/ev.0.jsonl")" -ge 10 ]'
check "mlog-causal, 10 kills: replays followed installed determinants" every_ge1 mlog_replay dets_installed
check "mlog-causal, 10 kills: no block ever went back on any node" monotone
# The other modes' periods (mlog-team: the own-det record runs again after
# the period's commit; mlog-fast: no hold): two kills, two periods.
for m in "mlog-team" "mlog-fast -T"; do
    mode=${m%% *}
    ARGS10_SAVE=$ARGS10; ARGS10="-N 128 -i 1500 -c 100 ${m#$mode}"; r2=$(seqsum -N 128 -i 1500 -c 100)
    ten_kills "two-$mode" "$mode" "11 6"
    np=$(grep -c '"ev":"partial_restore"' "$DIR/ev.0.jsonl")
    check "$mode, kills of 11 and 6 in two periods: exit 0 (got $RC), checksum $(sum_of) equals $r2, both partial ($np)" \
        eval '[ "$RC" = 0 ] && [ "$(sum_of)" = "$r2" ] && [ "$np" = 2 ] && ! logged "\"ev\":\"rollback\""'
    ARGS10=$ARGS10_SAVE
done
if [ "${PHX_IT_LONG:-0}" = 1 ]; then
    t0=$(now_ms)
    ten_kills ten-cr cr
    echo "ten kills under cr: $(( ($(now_ms) - t0) / 1000 )) s"
    nrb=$(grep -c '"ev":"rollback"' "$DIR/ev.0.jsonl")
    check "cr, the same 10 kills: exit 0 (got $RC), checksum equals $ref10, 10 global rollbacks ($nrb)" eval \
        '[ "$RC" = 0 ] && [ "$(sum_of)" = "$ref10" ] && [ "$nrb" = 10 ]'
fi
N=$N_SAVE; JOB_TIMEOUT=$JT_SAVE
finish
