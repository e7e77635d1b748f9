# Shared part of the GLB apps' integration tests (apps/uts/test_uts.sh,
# apps/bc/test_bc.sh). Source it with BIN set; then set APP (binary), ARGS
# (its problem flags) and WANT (the --seq result line).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../../tests/integration/lib.sh"
PHX=$BIN/phx
DELTA_MS=${PHX_HB_TIMEOUT:-1000}
SEED=${SEED:-$(( ($$ * 2654435761) % 4294967296 ))}
unset PHX_FT PHX_TD PHX_EVENTLOG PHX_GLB_FT PHX_GLB_DIE PHX_GLB_THREADS
export PHX_HB_TIMEOUT=$DELTA_MS
LIMIT=$(( 60 + 20 * DELTA_MS / 1000 ))
echo "# delta=${DELTA_MS}ms seed=$SEED (replay: SEED=$SEED)"

# job NAME N FLAGS...: APP on N nodes; $TMP/NAME.{out,err}, event logs
# $TMP/NAME.ev.RANK.jsonl, pids $TMP/NAME.pids; exit code in RC.
job() {
    local name=$1 n=$2; shift 2
    PHX_EVENTLOG="$TMP/$name.ev.%r.jsonl" timeout -k 5 $LIMIT "$PHX" run -n "$n" --pidfile "$TMP/$name.pids" \
        "$APP" $ARGS "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    RC=$?
    return $RC
}
exact() { [ "$RC" = 0 ] && grep -qxF "[0] $WANT" "$TMP/$1.out"; }
show() { echo "# rc=$RC"; grep -hv WARN "$TMP/$1.out" "$TMP/$1.err" | tail -6 | sed 's/^/#   /'; }
# expect_exact NAME N FLAGS...: the job prints WANT; a --glb-die death landed.
expect_exact() {
    local name=$1
    job "$@"
    if exact "$name"; then ok "$name: exact"; else fail "$name: exact"; show "$name"; fi
    case "$*" in *--glb-die=*)
        check "$name: the death landed" grep -q "dies at" "$TMP/$name.err" ;;
    esac
}
# expect_lost NAME RANK BACKUP N FLAGS...: clean abort naming the loss, no result.
expect_lost() {
    local name=$1 r=$2 y=$3; shift 3
    job "$name" "$@"
    check "$name: non-zero exit ($RC)" [ "$RC" != 0 ]
    check "$name: names the loss" grep -q "unrecoverable: lost rank $r and its backup at $y" "$TMP/$name.err"
    grep -q "unrecoverable: lost rank $r and its backup at $y" "$TMP/$name.err" ||
        tail -n 20 "$TMP/$name.err" | sed 's/^/#   /'
    check "$name: no result printed" sh -c "! grep -qF '${WANT%% *}' '$TMP/$name.out'"
}
# expect_root NAME N FLAGS...: rank 0 dies (its --glb-die death landed) and
# a survivor, the new root, prints WANT exactly once; exit 0.
expect_root() {
    local name=$1 n=$2 pats=() r
    job "$@"
    for ((r = 1; r < n; r++)); do pats+=(-e "[$r] $WANT"); done
    check "$name: rank 0's death landed" grep -q "rank 0 dies at" "$TMP/$name.err"
    if [ "$RC" = 0 ] && [ "$(grep -cxF "${pats[@]}" "$TMP/$name.out")" = 1 ]; then
        ok "$name: exact, reported by a survivor"
    else
        fail "$name: exact, reported by a survivor"; show "$name"
    fi
}
# expect_drain NAME RANK N FLAGS...: RANK gets SIGTERM at a --glb-die
# point (:term) and drains: the job prints WANT exactly once (exit 0), the
# leaver handed over and exited 0 by itself (its event log: drain_exit,
# then exit code 0), its final state was taken over as a handover, and
# nothing was adopted from a crash backup (glb-stats: adoptions 0 in all,
# or ADOPT when the test also kills ranks; handovers 1 in all).
expect_drain() {
    local name=$1 r=$2; shift 2
    PHX_GLB_STATS=1 job "$name" "$@"
    local ev="$TMP/$name.ev.$r.jsonl"
    check "$name: rank $r was told to drain" grep -q "rank $r is told to drain" "$TMP/$name.err"
    if exact "$name" || { [ "$RC" = 0 ] && grep -qF "] $WANT" "$TMP/$name.out"; }; then
        ok "$name: exact"
    else
        fail "$name: exact"; show "$name"
    fi
    check "$name: the result printed once" [ "$(grep -cF "] $WANT" "$TMP/$name.out")" = 1 ]
    check "$name: rank $r left by itself" grep -q "glb: rank $r left:" "$TMP/$name.err"
    check "$name: rank $r exited 0 after its drain" sh -c "grep -q '\"ev\":\"drain_exit\"' '$ev' &&
        grep '\"ev\":\"exit\"' '$ev' | grep -q '\"code\":0'"
    check "$name: its state was handed over" grep -q "took over a drained node's final state" "$TMP/$name.err"
    # Each node's counters, once (a node may print its line twice).
    grep -o 'glb-stats rank=.*' "$TMP/$name.err" | sort -u >"$TMP/$name.stats"
    check "$name: adopted from crash backups: ${ADOPT:-0} (the deaths)" [ "$(grep -o 'adoptions=[0-9]*' \
        "$TMP/$name.stats" | awk -F= '{s += $2} END {print s + 0}')" = "${ADOPT:-0}" ]
    check "$name: one handover" [ "$(grep -o 'handovers=[0-9]*' "$TMP/$name.stats" |
        awk -F= '{s += $2} END {print s + 0}')" = 1 ]
}
