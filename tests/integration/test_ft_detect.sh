#!/bin/bash
# Failure detection end to end: 8 loopback nodes with PHX_FT=1 run
# the busy app (every worker spinning); the test kills or stops nodes from
# the shell as soon as every node logged `start` (and, for (c), the second
# kill once the first failure is logged): no tool start-up between trigger
# and kill. phx-chaos-check reads the event logs and checks that every
# survivor got every notice and that all agree on the dead set.
#   (a) one SIGKILL   (b) two ring-adjacent SIGKILLs   (c) a kill while an
#   earlier failure is still propagating   (d) SIGSTOP past delta, then
#   SIGCONT: the node is declared dead, fences itself (exit 75) and is never
#   re-admitted   (e) 60 s fully busy with the default delta: no suspicion.
# Usage: test_ft_detect.sh BINDIR
# Env: PHX_HB_TIMEOUT (delta, ms; default 1000: every wait below derives
#      from it), SEED (chaos seed; default derived from the pid, printed),
#      FT_QUIET_SECONDS (length of (e), default 60).
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
CHECK=$(dirname "$0")/../../tools/chaos/phx-chaos-check
N=8
DELTA_MS=${PHX_HB_TIMEOUT:-1000}
SEED=${SEED:-$(( ($$ * 2654435761) % 4294967296 ))}
QUIET_S=${FT_QUIET_SECONDS:-60}
unset PHX_TD PHX_FT PHX_EVENTLOG PHX_HB_PERIOD PHX_WORKERS
export PHX_TD=none PHX_FT=1 PHX_HB_TIMEOUT=$DELTA_MS
echo "# n=$N delta=${DELTA_MS}ms seed=$SEED (replay: SEED=$SEED)"

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
T_ALL=$(now_ms)
# Whole seconds covering k*delta, rounded up (for sleep and job lengths).
dsec() { echo $(( ($1 * DELTA_MS + 999) / 1000 )); }

# poll_ms MS CMD...: run CMD every 20 ms until it succeeds or MS elapse.
poll_ms() {
    local end=$(( $(now_ms) + $1 )); shift
    while [ "$(now_ms)" -lt "$end" ]; do "$@" && return 0; sleep 0.02; done
    "$@"
}
# Number of event-log lines of event $1 (optional extra grep $2) over all ranks.
count_ev() { cat "$JOB"/ev.*.jsonl 2>/dev/null | grep "\"ev\":\"$1\"" | grep -c -- "${2:-}" ; }
all_started() { [ "$(count_ev start)" -ge "$N" ]; }
pid_of() { awk -v r="$1" '$1 == r { print $2 }' "$JOB/pids"; }

# start_job NAME SECONDS: busy job of SECONDS in $JOB, launcher pid in $L.
# The timeout(1) guard ends a hung job (rc 124) instead of the test.
start_job() {
    JOB=$TMP/$1; mkdir -p "$JOB"; rm -f "$JOB/pids"
    SECS=$2
    PHX_EVENTLOG="$JOB/ev.%r.jsonl" timeout -k 5 $((SECS + 30 + $(dsec 10))) \
        "$PHX" run -n $N --pidfile "$JOB/pids" "$BIN/busy" "$SECS" >"$JOB/out" 2>"$JOB/err" &
    L=$!; PIDS="$PIDS $L"
    T0=$(now_ms)
    # Startup is bounded by the runtime's startup timeout, not by delta.
    if ! poll_ms 30000 all_started; then
        fail "$1: all $N nodes log start"; return 1
    fi
}
# end_job NAME: waits for the launcher; checks exit 0 and rank 0's report.
end_job() {
    wait "$L"; local rc=$?
    check "$1: survivors end the job with exit 0 (rc $rc)" [ "$rc" = 0 ]
    check "$1: rank 0 reports the end" grep -q "busy: done after" "$JOB/out"
    echo "# $1: $(( $(now_ms) - T0 )) ms"
}
# keep NAME: a failed job's logs outlive $TMP, for replay and diagnosis.
keep() { local d; d=$(mktemp -d "${TMPDIR:-/tmp}/phx-ft-fail-$1.XXXXXX") && cp -r "$JOB"/. "$d" &&
         echo "# $1: logs kept in $d"; }
# sig SIGNAL RANK...: signals those ranks at once from this shell (no
# interpreter start-up between the trigger and the kill: a late kill would
# leave the job too little time), logged in phx-chaos's format for the checker.
sig() {
    local s=$1 r p t rc=0; shift
    for r in "$@"; do
        p=$(pid_of "$r"); t=$(date +%s%N)
        if [ -n "$p" ] && kill -"$s" "$p" 2>/dev/null; then
            printf '{"t":%s,"ev":"kill","rank":%d,"pid":%d,"signal":"SIG%s"}\n' "$t" "$r" "$p" "$s" \
                >>"$JOB/kills.jsonl"
        else
            rc=1
        fi
    done
    return $rc
}
# pick K: the K-th (from 0) seeded choice of a non-zero rank (rank 0 ends the job).
pick() { echo $(( 1 + (SEED / (7 + $1)) % (N - 1) )); }
# ring_adjacent: two ring-adjacent ranks, neither 0, from rank 0's start event.
ring_adjacent() {
    sed -n 's/.*"ev":"start".*"ring":\[\([0-9,]*\)\].*/\1/p' "$JOB/ev.0.jsonl" | tr ',' ' ' |
        awk -v s="$SEED" '{ n = NF; for (k = 0; k < n; k++) { i = (s + k) % n + 1; j = i % n + 1;
                           if ($i != 0 && $j != 0) { print $i, $j; exit } } }'
}
checker() { "$CHECK" -e "$JOB/ev.%r.jsonl" -k "$JOB/kills.jsonl" "$@" >"$JOB/check.out" 2>&1; }
show() { sed 's/^/#   /' "$1"; }
# A failure takes at most 2*delta + tau + B to be known everywhere (one
# failure) and R(f) grows by 2*delta per further ring-adjacent failure; the
# jobs run long enough for f failures plus one delta of slack for a
# saturated box, after the kill time.
job_len() { echo $(( 1 + $(dsec $(( 2 * $1 + 3 ))) )); }

# ---- (a) one SIGKILL --------------------------------------------------------
if start_job a "$(job_len 1)"; then
    sig KILL "$(pick 0)"; c=$?
    check "a: one random non-zero rank killed" [ "$c" = 0 ]
    end_job a
    checker; c=$?
    check "a: every survivor noticed it, all agree (checker rc $c)" [ "$c" = 0 ]
    [ "$c" = 0 ] || { show "$JOB/check.out"; keep a; }
    grep -E "last survivor|agreement" "$JOB/check.out" | sed 's/^/#   /'
fi

# ---- (b) two ring-adjacent SIGKILLs ----------------------------------------
if start_job b "$(job_len 2)"; then
    # shellcheck disable=SC2046
    sig KILL $(ring_adjacent); c=$?
    check "b: two ring-adjacent ranks killed" [ "$c" = 0 ]
    end_job b
    checker; c=$?
    check "b: both noticed everywhere, all agree (checker rc $c)" [ "$c" = 0 ]
    [ "$c" = 0 ] || { show "$JOB/check.out"; keep b; }
    check "b: ring repaired (ring events logged)" [ "$(count_ev ring)" -gt 0 ]
    grep -E "last survivor|agreement" "$JOB/check.out" | sed 's/^/#   /'
fi

# ---- (c) a kill while another failure is still propagating -----------------
if start_job c "$(job_len 2)"; then
    X=$(pick 1); Y=$(pick 2); [ "$Y" = "$X" ] && Y=$(( X % (N - 1) + 1 ))
    sig KILL "$X"; c=$?
    first_seen() { [ "$(count_ev suspect "\"dead\":$X[,}]")$(count_ev notice "\"dead\":$X,")" != 00 ]; }
    poll_ms $(( $(dsec 4) * 1000 + 10000 )) first_seen && sig KILL "$Y" || c=1
    check "c: second kill during the first one's recovery" [ "$c" = 0 ]
    end_job c
    checker; c=$?
    check "c: both noticed everywhere, all agree (checker rc $c)" [ "$c" = 0 ]
    [ "$c" = 0 ] || { show "$JOB/check.out"; keep c; }
    grep -E "last survivor|agreement" "$JOB/check.out" | sed 's/^/#   /'
fi

# ---- (d) SIGSTOP past delta, SIGCONT: declared dead, fenced ----------------
# Stopped at ~0 s; declared within 2*delta + B; resumed after 3*delta (past
# delta and past the declaration); fenced right after it runs again.
if start_job d "$(job_len 4)"; then
    V=$(( 1 + SEED % (N - 1) ))
    sig STOP "$V"; c=$?
    check "d: rank $V stopped" [ "$c" = 0 ]
    noticed_by_all() { [ "$(count_ev notice "\"dead\":$V,")" -ge $((N - 1)) ]; }
    poll_ms $(( 3 * DELTA_MS + 5000 )) noticed_by_all
    check "d: all $((N - 1)) others noticed the stopped rank" noticed_by_all
    sleep "$(dsec 1)"
    sig CONT "$V"
    fenced() { grep -q '"ev":"fenced"' "$JOB/ev.$V.jsonl"; }
    poll_ms $(( 2 * DELTA_MS + 5000 )) fenced
    check "d: rank $V fenced itself after SIGCONT" fenced
    check "d: it exited with 75" grep -q '"ev":"exit","code":75' "$JOB/ev.$V.jsonl"
    end_job d
    check "d: launcher reports rank $V fenced" grep -q "rank $V fenced" "$JOB/err"
    checker; c=$?
    check "d: survivors agree on {$V} (checker rc $c)" [ "$c" = 0 ]
    [ "$c" = 0 ] || { show "$JOB/check.out"; keep d; }
    # Never re-admitted: no survivor takes it back as a ring neighbour, and
    # none notices anything else.
    readmit=$(cat "$JOB"/ev.*.jsonl | grep -v "\"rank\":$V," | grep '"ev":"ring"' |
              grep -cE "\"(emitter|observer)\":$V[,}]")
    check "d: no survivor re-admits rank $V into the ring ($readmit)" [ "$readmit" = 0 ]
    other=$(cat "$JOB"/ev.*.jsonl | grep -v "\"rank\":$V," | grep '"ev":"notice"' | grep -vc "\"dead\":$V,")
    check "d: no other rank was declared ($other)" [ "$other" = 0 ]
fi

# ---- (e) no false suspicion under full load --------------------------------
if start_job e "$QUIET_S"; then
    end_job e
    s=$(count_ev suspect); nt=$(count_ev notice); f=$(count_ev fenced)
    check "e: ${QUIET_S}s fully busy, default delta: no suspect ($s), notice ($nt), fenced ($f)" \
        [ "$s$nt$f" = 000 ]
    st=$(grep -c "stall, emitter gets a fresh delta" "$JOB/err")
    echo "# e: detector stalls (gaps past delta/2) over all nodes: $st"
fi

echo "# total: $(( $(now_ms) - T_ALL )) ms"
finish
