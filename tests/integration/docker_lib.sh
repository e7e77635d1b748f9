# Shared part of the Docker Compose tests (tests/integration/test_docker.sh,
# tests/chaos/test_docker_*.sh). Source it after lib.sh with BIN set.
#   dk_require            skip (77) without a Docker engine or compose tool
#   dk_init PROJ [IMAGE]  own every container and network whose name starts
#                         with PROJ (and IMAGE, built under its own tag) and
#                         remove them at exit; bgpid PID adds a job to kill
#   dk_image              build the offline image; false (reported) if not
#   dk_left               how many containers/networks of PROJ are left
#   dk_exits_ok DIR SKIP  every rank of $N but SKIP exited 0 (run.sh's exit.R)
#   jacobi_ref ARGS...    jacobi --seq's checksum for the same problem
DK=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../tools/docker" && pwd)
BUILD=$(dirname "$BIN")
DK_BG=""

dk_require() {
    command -v docker >/dev/null 2>&1 || skip "no docker command"
    timeout 20 docker info >/dev/null 2>&1 || skip "no Docker engine (docker info failed)"
    docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1 ||
        skip "no docker compose / docker-compose tool"
}

# Compose names containers PROJ-nodeR and networks PROJ_phxnet; a test with
# several projects names them PROJ-NAME: both start with "PROJ[-_]".
dk_ids() {
    docker ps -aq --filter "name=^$DK_PROJ[-_]" 2>/dev/null
    docker network ls -q --filter "name=^$DK_PROJ[-_]" 2>/dev/null
}
dk_cleanup() {
    local p ids
    for p in $DK_BG; do kill "$p" 2>/dev/null; done
    ids=$(docker ps -aq --filter "name=^$DK_PROJ[-_]" 2>/dev/null)
    [ -n "$ids" ] && docker rm -f $ids >/dev/null 2>&1
    ids=$(docker network ls -q --filter "name=^$DK_PROJ[-_]" 2>/dev/null)
    [ -n "$ids" ] && docker network rm $ids >/dev/null 2>&1
    [ -n "${PHX_IMAGE:-}" ] && [ "$DK_OWN_IMAGE" = 1 ] && docker image rm "$PHX_IMAGE" >/dev/null 2>&1
    cleanup
}
dk_init() {
    DK_PROJ=$1
    DK_OWN_IMAGE=0
    [ -n "${2:-}" ] && { export PHX_IMAGE=$2; DK_OWN_IMAGE=1; }
    trap dk_cleanup EXIT
    trap 'exit 130' INT TERM
    # The nodes and every bound below derive from PHX_HB_TIMEOUT; the rest
    # of the caller's PHX_* would change what the test checks.
    unset PHX_FT PHX_TD PHX_LOG PHX_EVENTLOG PHX_HB_PERIOD PHX_WORKERS PHX_RECOVERY PHX_RESTART_ON \
          PHX_SECRET PHX_SECRET_FILE PHX_DOCKER_SUBNET PHX_DOCKER_OUT PHX_DOCKER_PROJECT PHX_CONFIG
    HB_MS=$(hb_ms)
    export PHX_HB_TIMEOUT=$HB_MS
}
bgpid() { DK_BG="$DK_BG $1"; }

dk_image() {
    local t id
    t=$(now_ms)
    id=$(timeout 120 "$DK/build-image.sh" "$BUILD" 2>"$TMP/build.err")
    check "image ${PHX_IMAGE:-phalanx:local} built offline ($id, $(( $(now_ms) - t )) ms)" [ -n "$id" ]
    [ -n "$id" ] || { sed 's/^/#   /' "$TMP/build.err"; return 1; }
}

dk_left() { dk_ids | wc -l; }

dk_exits_ok() {
    local r
    for ((r = 0; r < N; r++)); do
        [ "$r" = "$2" ] && continue
        [ "$(cat "$1/exit.$r" 2>/dev/null)" = 0 ] || return 1
    done
}

jacobi_ref() { "$BIN/jacobi" --seq "$@" | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p'; }
