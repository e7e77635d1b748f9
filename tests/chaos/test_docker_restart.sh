#!/bin/bash
# Container restart in Docker Compose (with the rejoin of restart-on=respawn):
# 4 containers run apps/jacobi with recovery=cr, restart-on=respawn and the
# compose policy `restart: on-failure:3`; each node counts its own starts in
# its container's filesystem (PHX_INCARNATION_FILE). Once rank 0 logged
# iteration 500 (the job runs 6000), the process of one non-zero rank's
# container is SIGKILLed from the host (a crash: `docker kill` would count
# as a manual stop, which restart policies ignore). Checks: Docker restarts
# the container, the node rejoins as incarnation 1 (event `rejoin`), every
# node ends with exit 0, the checksum equals jacobi --seq, no hang, nothing
# left. Skips (77) without Docker, and until restart-on=respawn exists.
# Usage: test_docker_restart.sh BINDIR   Env: SEED, PHX_HB_TIMEOUT (delta).
set -u
BIN=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../integration/lib.sh"
. "$HERE/../integration/docker_lib.sh"
N=4
PROJ=phxrestart-$$

dk_require
PHX_HB_TIMEOUT=$(hb_ms) "$BIN/phx" run -n 1 "$BIN/jacobi" --phx-ft=1 --phx-recovery=cr \
    --phx-restart-on=respawn -N 32 -i 10 -V 1 >/dev/null 2>&1 ||
    skip "needs restart-on=respawn: this build refuses it"
dk_init "$PROJ" "phxrestart-$$:local"

export PHX_DOCKER_TIMEOUT=$((60 + 20 * HB_MS / 1000))
SEED=${SEED:-$$}
V=$(( 1 + SEED % (N - 1) ))
ARGS="-N 96 -i 6000 -c 200"
REF=$(jacobi_ref $ARGS -P $N)
[ -n "$REF" ] || { echo "FAIL - jacobi --seq printed no checksum"; exit 1; }
echo "# $N containers, rank $V crashes (SEED=$SEED), delta $HB_MS ms, reference $REF"

dk_image || { finish; exit; }

OUT=$TMP/job
mkdir -p "$OUT/data"
T=$(now_ms)
PHX_FT=1 PHX_LOG=info PHX_RECOVERY=cr PHX_RESTART_ON=respawn PHX_INCARNATION_FILE=/tmp/phx-inc.%r \
PHX_EVENTLOG=/data/ev.%r.jsonl PHX_DOCKER_RESTART=on-failure:3 PHX_DOCKER_OUT=$OUT PHX_DOCKER_PROJECT=$PROJ \
    timeout -k 10 $((PHX_DOCKER_TIMEOUT + 60)) "$DK/run.sh" $N jacobi $ARGS >"$TMP/run.out" 2>"$TMP/run.err" &
JB=$!; bgpid $JB
if wait_event "$OUT/data/ev.0.jsonl" '"ev":"jacobi_iter","iter":500\}' $((60000 + 10 * HB_MS)) >/dev/null; then
    pid=$(docker inspect -f '{{.State.Pid}}' "$PROJ-node$V" 2>/dev/null)
    check "rank $V's container process ($pid) SIGKILLed at iteration 500" kill -9 "${pid:-0}"
    echo "# crash at $(( $(now_ms) - T )) ms"
else
    fail "rank 0 logs iteration 500"
fi
wait "$JB"; rc=$?
echo "# job: $(( $(now_ms) - T )) ms, run.sh rc $rc"
check "no hang: run.sh ended within its bound (rc $rc)" [ "$rc" != 124 ]
check "Docker restarted rank $V's container ($(cat "$OUT/restarts.$V" 2>/dev/null) times)" \
    [ "$(cat "$OUT/restarts.$V" 2>/dev/null || echo 0)" -ge 1 ]
check "rank $V rejoined (event rejoin)" grep -qs '"ev":"rejoin"' "$OUT"/data/ev.*.jsonl
all0() { local r; for ((r = 0; r < N; r++)); do [ "$(cat "$OUT/exit.$r" 2>/dev/null)" = 0 ] || return 1; done; }
check "every node, the restarted one included, exits 0 (run.sh rc $rc)" all0
sums=$(cat "$OUT"/node*.log 2>/dev/null | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' | sort -u)
check "checksum ${sums:-none} equals the reference $REF" [ "$sums" = "$REF" ]
[ "$FAIL" = 0 ] || { sed 's/^/#   /' "$TMP/run.err"; grep -v 'WARN net' "$TMP/run.out" | tail -30 | sed 's/^/#   /'; }
left=$(dk_left)
check "no container or network of the test left ($left)" [ "$left" = 0 ]
finish
