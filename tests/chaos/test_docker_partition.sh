#!/bin/bash
# Partition in Docker Compose: 5 containers run apps/jacobi with
# recovery=cr; once rank 0 logged iteration 500 (the kill lands inside the
# work by construction: the job runs 6000), one non-zero rank's container
# is cut off with `docker network disconnect`. Checks:
#   - the majority (4 containers) finishes with the reference checksum
#     (jacobi --seq), or every member exits with the same documented code
#     and a message; each of them logs the notice of the cut-off rank;
#   - the minority never prints a result, fences itself (exit 75) and
#     says it is on the minority side of a partition (core/ft.c quorum rule,
#     tools/chaos/README.md "Partitions");
#   - no hang (run.sh's bound), nothing of the test left behind.
# The image is built offline under a tag of its own and removed at the end.
# Skips (77) without a Docker engine or compose tool.
# Usage: test_docker_partition.sh BINDIR   Env: SEED, PHX_HB_TIMEOUT (delta).
set -u
BIN=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../integration/lib.sh"
. "$HERE/../integration/docker_lib.sh"
N=5
PROJ=phxpart-$$

dk_require
dk_init "$PROJ" "phxpart-$$:local"

# Start-up, 6000 iterations, detection and N - 1 silent declarations on
# the minority side (about delta each): 60 s + 20 delta bounds it.
export PHX_DOCKER_TIMEOUT=$((60 + 20 * HB_MS / 1000))
SEED=${SEED:-$$}
V=$(( 1 + SEED % (N - 1) ))
ARGS="-N 96 -i 6000 -c 200"
REF=$(jacobi_ref $ARGS -P $N)
[ -n "$REF" ] || { echo "FAIL - jacobi --seq printed no checksum"; exit 1; }
echo "# $N containers, rank $V cut off (SEED=$SEED), delta $HB_MS ms, reference $REF"

dk_image || { finish; exit; }

OUT=$TMP/job
mkdir -p "$OUT/data"
T=$(now_ms)
PHX_FT=1 PHX_LOG=info PHX_EVENTLOG=/data/ev.%r.jsonl PHX_DOCKER_OUT=$OUT PHX_DOCKER_PROJECT=$PROJ \
    timeout -k 10 $((PHX_DOCKER_TIMEOUT + 60)) "$DK/run.sh" $N jacobi --phx-recovery=cr $ARGS \
    >"$TMP/run.out" 2>"$TMP/run.err" &
JB=$!; bgpid $JB
if wait_event "$OUT/data/ev.0.jsonl" '"ev":"jacobi_iter","iter":500\}' $((60000 + 10 * HB_MS)) >/dev/null; then
    docker network disconnect "${PROJ}_phxnet" "$PROJ-node$V" 2>"$TMP/disc.err"; d=$?
    echo "# cut rank $V off at $(( $(now_ms) - T )) ms"
    check "docker network disconnect of rank $V at iteration 500" [ "$d" = 0 ]
else
    fail "rank 0 logs iteration 500"
fi
wait "$JB"; rc=$?
echo "# job: $(( $(now_ms) - T )) ms, run.sh rc $rc"
check "no hang: run.sh ended within its bound (rc $rc)" [ "$rc" != 124 ]
code() { cat "$OUT/exit.$1" 2>/dev/null; }
sums=$(cat "$OUT"/node*.log 2>/dev/null | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' | sort -u)
majority_ok() {
    local r c first=""
    for ((r = 0; r < N; r++)); do
        [ "$r" = "$V" ] && continue
        c=$(code $r); first=${first:-$c}
        [ "$c" = "$first" ] || { echo "# majority exits differ: rank $r $c, first $first"; return 1; }
    done
    if [ "$first" = 0 ]; then
        [ "$sums" = "$REF" ] || { echo "# checksums printed: ${sums:-none}"; return 1; }
    else
        case $first in 76|78) ;; *) echo "# majority exit $first is not a documented loss"; return 1 ;; esac
        grep -qE 'work lost|cannot be recovered' "$OUT"/node*.log || return 1
    fi
}
check "majority: exit 0 with the reference checksum, or one documented code with a message" majority_ok
noticed() {
    local r
    for ((r = 0; r < N; r++)); do
        [ "$r" = "$V" ] && continue
        grep '"ev":"notice"' "$OUT/data/ev.$r.jsonl" 2>/dev/null | grep -q "\"dead\":$V[,}]" ||
            { echo "# rank $r has no notice of $V"; return 1; }
    done
}
check "every majority member noticed rank $V" noticed
check "no checksum other than the reference anywhere (${sums:-none})" \
    sh -c "[ -z '$sums' ] || [ '$sums' = '$REF' ]"
check "minority: prints no result" sh -c "! grep -q checksum= '$OUT/node$V.log'"
mc=$(code $V)
check "minority: exits non-zero (exit $mc) with a message" \
    sh -c "[ '$mc' != 0 ] && grep -qE 'fenced|declared dead|cannot be recovered|work lost' '$OUT/node$V.log'"
check "minority fences itself: exit 75 (got $mc)" [ "$mc" = 75 ]
check "minority says it was cut off" grep -q "minority side of a partition" "$OUT/node$V.log"
[ "$FAIL" = 0 ] || { sed 's/^/#   /' "$TMP/run.err"; grep -v 'WARN net' "$TMP/run.out" | tail -30 | sed 's/^/#   /'; }
wait_for 20 sh -c "[ -z \"\$(docker ps -aq --filter name=^$PROJ-)\" ]"
left=$(dk_left)
check "no container or network of the test left ($left)" [ "$left" = 0 ]
[ "$FAIL" = 0 ] || { echo "# minority rank $V log:"; tail -n 25 "$OUT/node$V.log" | sed "s/^/#   /"; }
finish
