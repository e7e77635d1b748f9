#!/bin/bash
# Run one Phalanx job in Docker Compose and tear it down again.
#   tools/docker/run.sh N PROGRAM [ARGS...]
# Builds the image if it is missing (tools/docker/build-image.sh), writes the
# compose file (tools/docker/gen-compose.sh) into a private project directory,
# starts every node detached (`up -d`: a dead container must not stop the
# others, which is what fault tolerance is for), waits for all containers to
# stop (bounded), prints every node's log prefixed "nodeR| " and one line
# "node R: exit C" per node, then always removes the containers and the
# network (`down -v`), also on error or interrupt.
# Exit status: 0 if every node exited 0, 124 on timeout, 1 otherwise.
# Env:
#   PHX_DOCKER_TIMEOUT  seconds the job may run (default 90)
#   PHX_DOCKER_PROJECT  compose project = container-name prefix
#                       (default phx-<random>); the nodes are PROJECT-nodeR,
#                       e.g. for `docker kill PROJECT-node2`
#   PHX_DOCKER_OUT      directory that keeps docker-compose.yml, node logs
#                       (nodeR.log), exit codes (exit.R) and data/ (mounted
#                       at /data in every node: PHX_EVENTLOG=/data/ev.%r.jsonl);
#                       default: a temporary directory, removed at the end
#   PHX_DOCKER_BUILD    build directory for build-image.sh (default <repo>/build)
#   PHX_DOCKER_SUBNET   a.b.c of the /24 to use (default: a free 172.28.x)
#   PHX_DOCKER_RESTART  restart policy (gen-compose.sh); the run then waits
#                       until no node is running or restarting, and writes
#                       each node's restart count to restarts.R
#   all PHX_* runtime options, PHX_SECRET, PHX_IMAGE: see gen-compose.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: $0 N PROGRAM [ARGS...]" >&2; exit 2; }
N=$1
TIMEOUT=${PHX_DOCKER_TIMEOUT:-90}
export PHX_IMAGE=${PHX_IMAGE:-phalanx:local}
export PHX_DOCKER_PROJECT=${PHX_DOCKER_PROJECT:-phx-$(od -An -tx4 -N4 /dev/urandom | tr -d ' \n')}
PROJ=$PHX_DOCKER_PROJECT
log() { echo "run.sh: $*" >&2; }

if docker compose version >/dev/null 2>&1; then DC=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then DC=(docker-compose)
else log "neither 'docker compose' nor docker-compose found"; exit 1; fi
docker info >/dev/null 2>&1 || { log "no Docker engine answers (docker info failed)"; exit 1; }

if [ -n "${PHX_DOCKER_OUT:-}" ]; then
    OUT=$PHX_DOCKER_OUT; KEEP=1; mkdir -p "$OUT" || exit 1
else
    OUT=$(mktemp -d "${TMPDIR:-/tmp}/phx-docker.XXXXXX") || exit 1; KEEP=0
fi
chmod 700 "$OUT"                      # the compose file holds the secret
mkdir -p "$OUT/data"
export PHX_DOCKER_DATA=$OUT/data
YML=$OUT/docker-compose.yml
dc() { timeout -k 5 "${DC_TIMEOUT:-60}" "${DC[@]}" -p "$PROJ" -f "$YML" "$@"; }

UP=0
cleanup() {
    trap - EXIT INT TERM
    [ -n "${WPID:-}" ] && kill "$WPID" 2>/dev/null
    if [ "$UP" = 1 ]; then
        dc down -v --remove-orphans -t 2 >"$OUT/down.log" 2>&1 || {
            log "compose down failed (see $OUT/down.log); removing by name"
            for ((r = 0; r < N; r++)); do docker rm -f "$PROJ-node$r" >/dev/null 2>&1; done
            docker network ls -q --filter "label=com.docker.compose.project=$PROJ" |
                xargs -r docker network rm >/dev/null 2>&1
        }
    fi
    [ "$KEEP" = 1 ] || rm -rf "$OUT"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# Image: build it if missing.
if ! docker image inspect "$PHX_IMAGE" >/dev/null 2>&1; then
    log "image $PHX_IMAGE missing: building it"
    "$HERE/build-image.sh" ${PHX_DOCKER_BUILD:+"$PHX_DOCKER_BUILD"} >/dev/null || exit 1
fi

# A /24 under 172.28/16 that no Docker network uses yet.
pick_subnet() {
    local used x i
    used=$(docker network inspect $(docker network ls -q) \
           -f '{{range .IPAM.Config}}{{.Subnet}} {{end}}' 2>/dev/null | tr ' ' '\n')
    x=$(( $(od -An -tu1 -N1 /dev/urandom) ))
    for ((i = 0; i < 256; i++)); do
        grep -q "^172\.28\.$(( (x + i) % 256 ))\." <<<"$used" || { echo "172.28.$(( (x + i) % 256 ))"; return 0; }
    done
    return 1
}

T0=$(date +%s)
started=0
for attempt in 1 2 3; do
    SUBNET=${PHX_DOCKER_SUBNET:-$(pick_subnet)} || { log "no free subnet in 172.28/16"; exit 1; }
    PHX_DOCKER_SUBNET=$SUBNET "$HERE/gen-compose.sh" "$@" >"$YML" || exit 1
    chmod 600 "$YML"
    UP=1
    log "project $PROJ: $N nodes on $SUBNET.0/24, output in $OUT"
    if dc up -d --no-build >"$OUT/up.log" 2>&1; then started=1; break; fi
    log "compose up failed (attempt $attempt):"; sed 's/^/  /' "$OUT/up.log" >&2
    dc down -v --remove-orphans -t 1 >/dev/null 2>&1
    [ -z "${PHX_DOCKER_SUBNET:-}" ] || break   # a fixed subnet will not get better
done
[ "$started" = 1 ] || exit 1

# Wait for every node to stop, bounded by the job timeout.
NAMES=(); for ((r = 0; r < N; r++)); do NAMES+=("$PROJ-node$r"); done
timed_out=0
# In the background so that a signal to this script is handled at once.
# `docker wait` returns at a container's first exit; under a restart policy
# (PHX_DOCKER_RESTART) wait again while any node is running or restarting.
(
    end=$((SECONDS + TIMEOUT))
    while :; do
        timeout $((end - SECONDS)) docker wait "${NAMES[@]}" >/dev/null 2>&1 || exit 1
        [ -z "$(docker ps -q --filter "label=com.docker.compose.project=$PROJ" \
                --filter status=running --filter status=restarting)" ] && exit 0
        [ $SECONDS -lt $end ] || exit 1
        sleep 0.5
    done
) &
WPID=$!
if ! wait "$WPID"; then
    running=$(docker ps -q --filter "label=com.docker.compose.project=$PROJ" | wc -l)
    if [ "$running" -gt 0 ]; then
        timed_out=1
        log "timeout after ${TIMEOUT}s: $running node(s) still running, killing them"
        docker kill "${NAMES[@]}" >/dev/null 2>&1
    fi
fi

status=0
for ((r = 0; r < N; r++)); do
    c=${NAMES[$r]}
    docker logs "$c" >"$OUT/node$r.log" 2>&1
    sed "s/^/node$r| /" "$OUT/node$r.log"
done
for ((r = 0; r < N; r++)); do
    c=${NAMES[$r]}
    code=$(docker inspect -f '{{.State.ExitCode}}' "$c" 2>/dev/null || echo missing)
    oom=$(docker inspect -f '{{.State.OOMKilled}}' "$c" 2>/dev/null || echo false)
    restarts=$(docker inspect -f '{{.RestartCount}}' "$c" 2>/dev/null || echo 0)
    echo "$code" >"$OUT/exit.$r"
    echo "$restarts" >"$OUT/restarts.$r"
    [ "$oom" = true ] && oom=" (OOM killed)" || oom=""
    [ "$restarts" -gt 0 ] 2>/dev/null && oom="$oom (restarted $restarts times)"
    echo "node $r: exit $code$oom"
    [ "$code" = 0 ] || status=1
done
echo "job $PROJ: $(( $(date +%s) - T0 )) s"
[ "$timed_out" = 1 ] && exit 124
exit $status
