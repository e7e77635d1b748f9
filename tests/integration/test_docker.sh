#!/bin/bash
# Phalanx jobs in Docker Compose (tools/docker): offline image, one container
# per node on a private bridge network with fixed addresses.
#   (a) ring on 4 containers: OK, every container exits 0;
#   (b) PHX_FT=1 PHX_TD=none busy on 4 containers, one non-zero rank's
#       container is `docker kill`ed ~3 s into the job: the survivors exit 0,
#       rank 0 reports the end, and every survivor's log and event log name
#       the dead rank;
#   (c) nothing of the test's projects (containers, networks) is left.
# Without a Docker engine (or a compose tool) the test is skipped.
# Touches only containers/networks of its own projects (phxit-<pid>-*).
# Usage: test_docker.sh BINDIR
# Env: SEED (victim choice; default from the pid), DOCKER_JOB_TIMEOUT (s,
#      bound of each compose run, default 60).
set -u
BIN=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
DK=$HERE/../../tools/docker
BUILD=$(dirname "$BIN")
N=4
PREFIX=phxit-$$
BGPIDS=""

if ! timeout 20 docker info >/dev/null 2>&1; then
    echo "SKIP: no Docker engine (docker info failed)"
    echo "0 passed, 0 failed"; exit 0
fi
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
    echo "SKIP: no docker compose / docker-compose tool"
    echo "0 passed, 0 failed"; exit 0
fi

dk_cleanup() {
    for p in $BGPIDS; do kill "$p" 2>/dev/null; done
    local ids
    ids=$(docker ps -aq --filter "name=^$PREFIX-" 2>/dev/null)
    [ -n "$ids" ] && docker rm -f $ids >/dev/null 2>&1
    ids=$(docker network ls -q --filter "name=^$PREFIX-" 2>/dev/null)
    [ -n "$ids" ] && docker network rm $ids >/dev/null 2>&1
    cleanup
}
trap dk_cleanup EXIT
trap 'exit 130' INT TERM

unset PHX_FT PHX_TD PHX_LOG PHX_EVENTLOG PHX_HB_TIMEOUT PHX_HB_PERIOD PHX_WORKERS \
      PHX_SECRET PHX_SECRET_FILE PHX_DOCKER_SUBNET PHX_DOCKER_OUT PHX_DOCKER_PROJECT PHX_CONFIG
export PHX_DOCKER_TIMEOUT=${DOCKER_JOB_TIMEOUT:-60}
SEED=${SEED:-$$}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

T=$(now_ms)
id=$(timeout 120 "$DK/build-image.sh" "$BUILD" 2>"$TMP/build.err")
check "image phalanx:local built offline ($id, $(( $(now_ms) - T )) ms)" [ -n "$id" ]
[ -n "$id" ] || { sed 's/^/#   /' "$TMP/build.err"; finish; exit; }

# job NAME N PROG ARGS...: run.sh with its output kept in $TMP/NAME.
job() {
    local name=$1; shift
    PHX_DOCKER_OUT=$TMP/$name PHX_DOCKER_PROJECT=$PREFIX-$name \
        timeout -k 10 $((PHX_DOCKER_TIMEOUT + 60)) "$DK/run.sh" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
}
exits_ok() {   # exits_ok DIR SKIP_RANK: every rank but SKIP_RANK exited 0
    local r
    for ((r = 0; r < N; r++)); do
        [ "$r" = "$2" ] && continue
        [ "$(cat "$1/exit.$r" 2>/dev/null)" = 0 ] || return 1
    done
}
show() { sed 's/^/#   /' "$@"; }

# ---- (a) ring on 4 containers ----------------------------------------------
T=$(now_ms)
job a "$N" ring; rc=$?
echo "# a: $(( $(now_ms) - T )) ms"
check "a: run.sh exits 0 (rc $rc)" [ "$rc" = 0 ]
check "a: ring reports OK" grep -q "ring: $N nodes .* OK" "$TMP/a/node0.log"
check "a: every container exits 0" exits_ok "$TMP/a" -1
[ "$rc" = 0 ] || { show "$TMP/a.out" "$TMP/a.err"; }

# ---- (b) FT: kill one container mid-job ------------------------------------
VICTIM=$(( 1 + SEED % (N - 1) ))
SECS=8
echo "# b: victim rank $VICTIM (SEED=$SEED)"
all_started() { [ "$(cat "$TMP"/b/data/ev.*.jsonl 2>/dev/null | grep -c '"ev":"start"')" -ge "$N" ]; }
T=$(now_ms)
PHX_FT=1 PHX_TD=none PHX_LOG=info PHX_EVENTLOG=/data/ev.%r.jsonl job b "$N" busy "$SECS" &
JB=$!; BGPIDS="$BGPIDS $JB"
if wait_for 45 all_started; then
    sleep 3
    docker kill "$PREFIX-b-node$VICTIM" >/dev/null 2>&1; k=$?
    echo "# b: killed rank $VICTIM at $(( $(now_ms) - T )) ms"
    check "b: docker kill of rank $VICTIM's container" [ "$k" = 0 ]
else
    fail "b: all $N nodes log start"
fi
wait "$JB"; rc=$?
echo "# b: $(( $(now_ms) - T )) ms (run.sh rc $rc)"
# run.sh: 0 all nodes exited 0, 1 some did not (the victim: 137), 124 timeout.
check "b: run.sh finished, not timed out (rc $rc)" [ "$rc" = 1 ]
check "b: killed container exit 137" [ "$(cat "$TMP/b/exit.$VICTIM" 2>/dev/null)" = 137 ]
check "b: every survivor exits 0" exits_ok "$TMP/b" "$VICTIM"
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
left=$( (docker ps -aq --filter "name=^$PREFIX-"; docker network ls -q --filter "name=^$PREFIX-") | wc -l)
check "c: no container or network of the test left ($left)" [ "$left" = 0 ]

finish
