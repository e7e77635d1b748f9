#!/bin/bash
# Drain in Docker Compose: 4 containers run apps/jacobi with recovery=cr
# (drain-on=term, the default). At iteration 500 (of 6000) jacobi's test
# gate holds the next checkpoint and the job's end; then `docker compose
# stop node3` (SIGTERM, SIGKILL after the service's stop_grace_period)
# stops rank 3's container, and the gate opens once rank 3 logged its
# drain request: the signal lands inside the job by construction, however
# long the compose tool takes to start. The node is PID 1
# of its container without an init; it installs its own SIGTERM handler, so
# the kernel delivers the signal. Checks: rank 3 drains (hands its slices
# over at the next checkpoint) and its container exits 0 before the grace
# runs out, every node exits 0, the checksum equals jacobi --seq, no
# failure, rollback or recovery round in any event log. Then the same
# with drain-on=off: the stop is a crash (143), recovered, the same result.
# Nothing left at the end.
# Skips (77) without Docker.
# Usage: test_docker_drain.sh BINDIR   Env: PHX_HB_TIMEOUT (delta).
set -u
BIN=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../integration/lib.sh"
. "$HERE/../integration/docker_lib.sh"
N=4
V=3
PROJ=phxdrain-$$

dk_require
dk_init "$PROJ" "phxdrain-$$:local"
if docker compose version >/dev/null 2>&1; then DC=(docker compose); else DC=(docker-compose); fi

export PHX_DOCKER_TIMEOUT=$((60 + 20 * HB_MS / 1000))
# The grace must hold a checkpoint interval (200 iterations) and the cut.
GRACE_S=$((10 + 2 * HB_MS / 1000))
ARGS="-N 96 -i 6000 -c 200"
REF=$(jacobi_ref $ARGS -P $N)
[ -n "$REF" ] || { echo "FAIL - jacobi --seq printed no checksum"; exit 1; }
echo "# $N containers, rank $V stopped, delta $HB_MS ms, grace ${GRACE_S}s, reference $REF"

dk_image || { finish; exit; }

OUT=$TMP/job
mkdir -p "$OUT/data"
T=$(now_ms)
PHX_FT=1 PHX_LOG=info PHX_RECOVERY=cr PHX_EVENTLOG=/data/ev.%r.jsonl PHX_DOCKER_STOP_GRACE=${GRACE_S}s \
PHX_DOCKER_OUT=$OUT PHX_DOCKER_PROJECT=$PROJ \
    timeout -k 10 $((PHX_DOCKER_TIMEOUT + 60)) "$DK/run.sh" $N jacobi $ARGS -H 500 -g /data/go >"$TMP/run.out" 2>"$TMP/run.err" &
JB=$!; bgpid $JB
if wait_event "$OUT/data/ev.*.jsonl" '"ev":"jacobi_hold","iter":500\}' $((60000 + 10 * HB_MS)) >/dev/null; then
    t0=$(now_ms)
    ( timeout $((GRACE_S + 30)) "${DC[@]}" -p "$PROJ" -f "$OUT/docker-compose.yml" stop node$V \
        >"$TMP/stop.out" 2>&1; echo $? >"$TMP/stop.rc" ) &
    SP=$!; bgpid $SP
    wait_event "$OUT/data/ev.$V.jsonl" '"ev":"drain_request"' $((GRACE_S * 1000 + 30000)) >/dev/null
    check "rank $V got the SIGTERM and asked to drain" [ $? = 0 ]
    : >"$OUT/data/go.tmp" && mv -f "$OUT/data/go.tmp" "$OUT/data/go"
    wait $SP
    t1=$(now_ms)
    src=$(cat "$TMP/stop.rc" 2>/dev/null)
    check "${DC[*]} stop node$V at iteration 500: done in $((t1 - t0)) ms (rc $src)" [ "$src" = 0 ]
    # SIGKILL after the grace would leave 137.
    code=$(docker inspect -f '{{.State.ExitCode}}' "$PROJ-node$V" 2>/dev/null)
    check "node$V's container exited 0 within its grace of ${GRACE_S}s (got ${code:-none})" [ "$code" = 0 ]
else
    fail "the main task logs its hold at iteration 500"
    : >"$OUT/data/go"
fi
wait "$JB"; rc=$?
echo "# job: $(( $(now_ms) - T )) ms, run.sh rc $rc"
check "run.sh exits 0: every node, the stopped one included, exited 0 (rc $rc)" [ "$rc" = 0 ]
all0() { local r; for ((r = 0; r < N; r++)); do [ "$(cat "$OUT/exit.$r" 2>/dev/null)" = 0 ] || return 1; done; }
check "exit codes 0 for every node ($(cat "$OUT"/exit.* 2>/dev/null | tr '\n' ' '))" all0
sums=$(cat "$OUT"/node*.log 2>/dev/null | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' | sort -u)
check "checksum ${sums:-none} equals the reference $REF" [ "$sums" = "$REF" ]
none() { ! grep -qs "$1" "$OUT"/data/ev.*.jsonl; }
check "rank $V logged its drain" grep -qs '"ev":"drain_exit"' "$OUT/data/ev.$V.jsonl"
check "every survivor applied the drain of rank $V" \
    [ "$(grep -ls "\"ev\":\"drain_done\",\"rank\":$V," "$OUT"/data/ev.*.jsonl | wc -l)" = "$N" ]
check "no failure declared" none '"ev":"failure"'
check "nobody rolled back" none '"ev":"rollback"'
check "no recovery round" none '"ev":"recovery_done"'
[ "$FAIL" = 0 ] || { sed 's/^/#   /' "$TMP/run.err" "$TMP/stop.out"; grep -v 'WARN net' "$TMP/run.out" | tail -30 | sed 's/^/#   /'; }
# ---- drain-on=off: docker stop is a crash, recovered -------------------------------
# The same job and stop with PHX_DRAIN_ON=off: rank 3's container exits 143
# (SIGTERM stops the node), the others recover its loss from the last
# checkpoint and still print the reference; run.sh says not every node
# exited 0. The gate opens once the container stopped.
OUT2=$TMP/off
mkdir -p "$OUT2/data"
PHX_FT=1 PHX_LOG=info PHX_RECOVERY=cr PHX_DRAIN_ON=off PHX_EVENTLOG=/data/ev.%r.jsonl \
PHX_DOCKER_STOP_GRACE=${GRACE_S}s PHX_DOCKER_OUT=$OUT2 PHX_DOCKER_PROJECT=$PROJ-off \
    timeout -k 10 $((PHX_DOCKER_TIMEOUT + 60)) "$DK/run.sh" $N jacobi $ARGS -H 500 -g /data/go >"$TMP/off.out" 2>"$TMP/off.err" &
JB=$!; bgpid $JB
if wait_event "$OUT2/data/ev.*.jsonl" '"ev":"jacobi_hold","iter":500\}' $((60000 + 10 * HB_MS)) >/dev/null; then
    timeout $((GRACE_S + 30)) "${DC[@]}" -p "$PROJ-off" -f "$OUT2/docker-compose.yml" stop node$V >"$TMP/stop2.out" 2>&1
    src=$?
    check "off: ${DC[*]} stop node$V (rc $src)" [ "$src" = 0 ]
else
    fail "off: the main task logs its hold at iteration 500"
fi
: >"$OUT2/data/go.tmp" && mv -f "$OUT2/data/go.tmp" "$OUT2/data/go"
wait "$JB"; rc=$?
check "off: node$V's container exited 143, SIGTERM stopped it ($(cat "$OUT2/exit.$V" 2>/dev/null))" \
    [ "$(cat "$OUT2/exit.$V" 2>/dev/null)" = 143 ]
check "off: the others exited 0, run.sh says not all did (rc $rc)" eval '[ "$rc" = 1 ] && dk_exits_ok "$OUT2" $V'
sums=$(cat "$OUT2"/node*.log 2>/dev/null | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' | sort -u)
check "off: checksum ${sums:-none} equals the reference $REF" [ "$sums" = "$REF" ]
check "off: recovered as a crash" grep -qs '"ev":"recovery_done"' "$OUT2"/data/ev.*.jsonl
check "off: no drain" eval '! grep -qs "\"ev\":\"drain_request\"" "$OUT2"/data/ev.*.jsonl'
left=$(dk_left)
check "no container or network of the test left ($left)" [ "$left" = 0 ]
finish
