#!/bin/bash
# Failure-detection latency on loopback (ft/hb/hb.h): for n = 4, 8, 16
# nodes, start a job (busy app, idle mode), kill one rank with phx-chaos,
# wait until every survivor logged its notice, end the job, and read the
# kill-to-last-notice latency from phx-chaos-check --json. One kill per
# job, so every sample is a first failure in an n-node group.
#
# Victims come in three classes, KILLS jobs each: rank 0, the last rank
# (n-1) and a random rank in between. The first two are the ends of the
# rank order, where the transport's "higher rank redials" rule and the
# ring's wrap-around meet: the last rank's observer is rank 0, which does
# not redial it, so its loss must be learnt some other way than a refused
# redial.
#
# Prints per n and victim class: median and worst latency, the seed's bound
#   T(1) = 2*delta + tau + B,  B = (floor(log2 n) + 1) * tau   (ft/hb/README.md)
# and whether every kill was within T(1) + 10 ms; then one line per n over
# all classes. tau (one-way loopback latency) = median round trip of
# `pingpong lat` / 2, measured here.
#
# Usage: tools/bench/bench_detect.sh BUILD_DIR [KILLS=20]   (KILLS per class)
# Env:   SIGNAL=KILL (default; the TCP reset hint applies, see the README's
#        "Runtime integration") or STOP (silent crash: pure heartbeat
#        timeout path), SIZES="4 8 16", VICTIMS="0 last mid" (classes),
#        PHX_HB_TIMEOUT (delta ms, default 1000), SEED (printed; replays
#        the random victims and times).
set -u
B=${1:?usage: bench_detect.sh BUILD_DIR [KILLS]}/bin
KILLS=${2:-20}
SIGNAL=${SIGNAL:-KILL}
SIZES=${SIZES:-4 8 16}
VICTIMS=${VICTIMS:-0 last mid}
DELTA_MS=${PHX_HB_TIMEOUT:-1000}
SEED=${SEED:-$(( ($$ * 2654435761) % 4294967296 ))}
HERE=$(cd "$(dirname "$0")" && pwd)
CHAOS=$HERE/../chaos/phx-chaos
CHECK=$HERE/../chaos/phx-chaos-check
TMP=$(mktemp -d "${TMPDIR:-/tmp}/phx-bd.XXXXXX")
L=""
cleanup() { [ -n "$L" ] && kill "$L" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
unset PHX_TD PHX_FT PHX_EVENTLOG PHX_HB_PERIOD
export PHX_TD=none PHX_FT=1 PHX_HB_TIMEOUT=$DELTA_MS PHX_KILL_GRACE=0.5 PHX_LOG=error

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
poll_ms() {
    local end=$(( $(now_ms) + $1 )); shift
    while [ "$(now_ms)" -lt "$end" ]; do "$@" && return 0; sleep 0.02; done
    "$@"
}
count_ev() { cat "$J"/ev.*.jsonl 2>/dev/null | grep -c "\"ev\":\"$1\""; }
started() { [ "$(count_ev start)" -ge "$n" ]; }
noticed() { [ "$(count_ev notice)" -ge $((n - 1)) ]; }

echo "phalanx failure-detection latency: delta=${DELTA_MS} ms, SIG$SIGNAL, $KILLS kills per n," \
     "seed $SEED, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"

# tau: median of 5 `pingpong lat` medians (round trip / 2).
taus=""
for _ in 1 2 3 4 5; do
    t=$(PHX_FT=0 "$B/phx" run -n 2 "$B/pingpong" lat 5000 2>/dev/null |
        awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^median_us=/) { split($i, a, "="); print a[2] / 2 } }')
    taus="$taus $t"
done
TAU_US=$(echo $taus | tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
echo "tau (one-way, pingpong lat median / 2) = ${TAU_US} us"

# Prints the summary row of the latencies in file $1 (MISS: no complete
# notice) for n = $2, labelled $3.
summary() {
    python3 - "$1" "$2" "$DELTA_MS" "$TAU_US" "$3" <<'EOF'
import math, statistics, sys
vals = [l.strip() for l in open(sys.argv[1]) if l.strip()]
n, d, tau = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]) / 1000.0
bound = 2 * d + tau + (int(math.log2(n)) + 1) * tau
got = [float(v) for v in vals if v != "MISS"]
miss = len(vals) - len(got)
if got:
    ok = miss == 0 and all(v <= bound + 10 for v in got)
    print("| %d | %s | %d%s | %.1f | %.1f | %.2f | %s |" % (n, sys.argv[5], len(got),
          " (+%d missed)" % miss if miss else "", statistics.median(got), max(got), bound,
          "yes" if ok else "NO"))
else:
    print("| %d | %s | 0 (%d missed) | - | - | %.2f | NO |" % (n, sys.argv[5], miss, bound))
EOF
}

printf '\n| n | victim | kills | median (ms) | worst (ms) | T(1) = 2d+tau+B (ms) | all <= T(1)+10 ms |\n'
printf '|---|---|---|---|---|---|---|\n'
i=0
for n in $SIZES; do
    : >"$TMP/lat.$n"
    for cls in $VICTIMS; do
        : >"$TMP/lat.$n.$cls"
        for k in $(seq "$KILLS"); do
            i=$((i + 1))
            case $cls in
            0) target="rank 0" ;;
            last) target="rank $((n - 1))" ;;
            mid) [ "$n" -ge 3 ] || continue; target="rank $(( 1 + (SEED + i) % (n - 2) ))" ;;
            *) echo "bench_detect.sh: unknown victim class '$cls' (0, last, mid)" >&2; exit 2 ;;
            esac
            J=$TMP/j.$n.$cls.$k; mkdir -p "$J"
            # Idle mode (0 spinners): the figure is the protocol's, not the
            # scheduler's; the job is ended by us once every notice is in.
            PHX_EVENTLOG="$J/ev.%r.jsonl" "$B/phx" run -n "$n" --pidfile "$J/pids" "$B/busy" 600 50 0 \
                >/dev/null 2>"$J/err" &
            L=$!
            if ! poll_ms 30000 started; then
                echo "n=$n kill $k: job did not start" >&2; kill "$L"; wait "$L"; L=""; continue
            fi
            # A random instant within one heartbeat period after the start, so
            # kills land at every phase of the heartbeat cycle.
            "$CHAOS" --pidfile "$J/pids" --seed $((SEED + i)) --allow-root \
                --window 0.2 $(awk -v d="$DELTA_MS" 'BEGIN { print 0.2 + d / 10000 }') \
                --signal "$SIGNAL" --log "$J/kills.jsonl" $target >"$J/chaos.out" 2>&1
            poll_ms $(( 3 * DELTA_MS + 10000 )) noticed
            victim=$(sed -n 's/.*"rank":\([0-9]*\).*/\1/p' "$J/kills.jsonl" | head -1)
            [ "$SIGNAL" = STOP ] && [ -n "$victim" ] &&
                kill -9 "$(awk -v r="$victim" '$1 == r { print $2 }' "$J/pids")" 2>/dev/null
            kill "$L" 2>/dev/null; wait "$L" 2>/dev/null; L=""
            "$CHECK" -e "$J/ev.%r.jsonl" -k "$J/kills.jsonl" --json 2>/dev/null |
                python3 -c 'import json,sys
s = json.load(sys.stdin); f = s["failures"]
l = f[0]["last"] if f else None
print("%.3f" % l["latency_ms"] if l and l["complete"] and l["latency_ms"] is not None else "MISS")' \
                >>"$TMP/lat.$n.$cls" || echo MISS >>"$TMP/lat.$n.$cls"
        done
        cat "$TMP/lat.$n.$cls" >>"$TMP/lat.$n"
        summary "$TMP/lat.$n.$cls" "$n" "$cls"
    done
    summary "$TMP/lat.$n" "$n" "all"
done
