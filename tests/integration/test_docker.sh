#!/bin/bash
# Phalanx jobs in Docker Compose (tools/docker): offline image, one container
# per node on a private bridge network with fixed addresses.
#   (a) ring on 4 containers: OK, every container exits 0;
#   (b) PHX_FT=1 PHX_TD=none busy on 4 containers, one non-zero rank's
#       container is `docker kill`ed while the job runs: the survivors exit
#       0, rank 0 reports the end, and every survivor's log and event log
#       name the dead rank;
#   (c) nothing of the test's projects (containers, networks) is left.
# The kill lands inside the job by construction: busy --hold-until keeps
# the job open until the test's gate file (in the shared /data) exists; the
# test kills once every node logged busy_spin, and opens the gate once
# every survivor logged the notice of the death (bounded by 10 delta).
# Without a Docker engine (or a compose tool) the test is skipped (exit 77).
# Touches only containers/networks of its own projects (phxit-<pid>-*).
# Usage: test_docker.sh BINDIR
# Env: SEED (victim choice; default from the pid), DOCKER_JOB_TIMEOUT (s,
#      bound of each compose run, default 60 + 20 delta).
set -u
BIN=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
. "$HERE/docker_lib.sh"
N=4
PREFIX=phxit-$$

dk_require
dk_init "$PREFIX"
# Container start-up plus, in (b), detection within 10 delta: 20 delta is slack.
export PHX_DOCKER_TIMEOUT=${DOCKER_JOB_TIMEOUT:-$((60 + 20 * HB_MS / 1000))}
SEED=${SEED:-$$}
dk_image || { finish; exit; }

# job NAME N PROG ARGS...: run.sh with its output kept in $TMP/NAME.
job() {
    local name=$1; shift
    PHX_DOCKER_OUT=$TMP/$name PHX_DOCKER_PROJECT=$PREFIX-$name \
        timeout -k 10 $((PHX_DOCKER_TIMEOUT + 60)) "$DK/run.sh" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
}
show() { sed 's/^/#   /' "$@"; }

# ---- (a) ring on 4 containers ----------------------------------------------
T=$(now_ms)
job a "$N" ring; rc=$?
echo "# a: $(( $(now_ms) - T )) ms"
check "a: run.sh exits 0 (rc $rc)" [ "$rc" = 0 ]
check "a: ring reports OK" grep -q "ring: $N nodes .* OK" "$TMP/a/node0.log"
check "a: every container exits 0" dk_exits_ok "$TMP/a" -1
[ "$rc" = 0 ] || { show "$TMP/a.out" "$TMP/a.err"; }

# ---- (b) FT: kill one container mid-job ------------------------------------
VICTIM=$(( 1 + SEED % (N - 1) ))
echo "# b: victim rank $VICTIM (SEED=$SEED)"
EV="$TMP/b/data/ev.*.jsonl"
mkdir -p "$TMP/b/data"
GATE=$TMP/b/data/go   # /data/go in the containers
T=$(now_ms)
PHX_FT=1 PHX_TD=none PHX_LOG=info PHX_EVENTLOG=/data/ev.%r.jsonl job b "$N" busy --hold-until /data/go 0 &
JB=$!; bgpid $JB
all_spin() { [ "$(event_count "$EV" '"ev":"busy_spin"')" -ge "$N" ]; }
# Every survivor has the notice of the victim's death.
all_notice() {
    local r
    for ((r = 0; r < N; r++)); do
        [ "$r" = "$VICTIM" ] && continue
        [ "$(event_count "$TMP/b/data/ev.$r.jsonl" "\"ev\":\"notice\".*\"dead\":$VICTIM[,}]")" -gt 0 ] || return 1
    done
}
if wait_for 45 all_spin; then
    docker kill "$PREFIX-b-node$VICTIM" >/dev/null 2>&1; k=$?
    echo "# b: killed rank $VICTIM at $(( $(now_ms) - T )) ms"
    check "b: docker kill of rank $VICTIM's container while every node works" [ "$k" = 0 ]
    check "b: every survivor logs the notice of rank $VICTIM within 10 delta" \
        wait_for $(( 10 * HB_MS / 1000 + 1 )) all_notice
else
    fail "b: all $N nodes log busy_spin"
fi
gate_open "$GATE"
wait "$JB"; rc=$?
echo "# b: $(( $(now_ms) - T )) ms (run.sh rc $rc)"
# run.sh: 0 all nodes exited 0, 1 some did not (the victim: 137), 124 timeout.
check "b: run.sh finished, not timed out (rc $rc)" [ "$rc" = 1 ]
check "b: killed container exit 137" [ "$(cat "$TMP/b/exit.$VICTIM" 2>/dev/null)" = 137 ]
check "b: every survivor exits 0" dk_exits_ok "$TMP/b" "$VICTIM"
check "b: rank 0 reports the end" grep -q "busy: done after" "$TMP/b/node0.log"
names_dead() {
    local r
    for ((r = 0; r < N; r++)); do
        [ "$r" = "$VICTIM" ] && continue
        grep -q "rank $VICTIM is dead" "$TMP/b/node$r.log" || { echo "# rank $r log lacks it"; return 1; }
        grep '"ev":"notice"' "$TMP/b/data/ev.$r.jsonl" 2>/dev/null | grep -q "\"dead\":$VICTIM[,}]" ||
            { echo "# rank $r event log lacks it"; return 1; }
    done
}
check "b: every survivor's log and event log name dead rank $VICTIM" names_dead
[ "$FAIL" = 0 ] || { show "$TMP/b.out" "$TMP/b.err"; }

# ---- (c) nothing left behind ------------------------------------------------
left=$(dk_left)
check "c: no container or network of the test left ($left)" [ "$left" = 0 ]

finish
