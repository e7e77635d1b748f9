#!/bin/bash
# A short chaos campaign (tools/chaos/campaign): about 20 seeded runs over
# apps x recovery modes x failure kinds on 4 loopback nodes, each classified
# against the fault-free answer. Fails on any WRONG result or hang (the
# campaign's exit status and its table), on a run that was not classified,
# and when fewer than a quarter of the faults landed inside the work (so the
# test cannot pass by breaking nothing). Bounded: each run by 30 s + 10
# delta, the campaign by BUDGET seconds (no new run starts after it). A
# run's detection and recovery take a few delta, so the budget is 35 delta:
# 35 s at the default delta, longer where delta is raised for load or a
# sanitizer, so that the campaign still gets its 5 runs.
# Then one `freeze` run (a rank SIGSTOPped for good, jacobi with cr): phx
# used to wait for it for ever after the job's result was out; now it kills
# a node still stopped 5 s after the job ended, so the run ends, exact. The
# run holds jacobi's end on a gate until the SIGSTOP landed (--hold): a
# short job must not finish before its fault.
# Usage: test_campaign.sh BINDIR   Env: SEED, RUNS (20), BUDGET (35 delta),
#        PHX_HB_TIMEOUT (delta).
set -u
BIN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../integration/lib.sh"
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || skip "python3 is needed by tools/chaos/campaign"
"$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.3", 0))' 2>/dev/null ||
    skip "cannot bind 127.0.0.3 (the host-loss kind needs loopback aliases)"
SEED=${SEED:-$(( ($$ * 2654435761) % 4294967296 ))}
RUNS=${RUNS:-20}
BUDGET=${BUDGET:-$(( 35 * $(hb_ms) / 1000 ))}
echo "# campaign: $RUNS runs, seed $SEED, budget ${BUDGET}s, delta $(hb_ms) ms"
T=$(now_ms)
"$PY" "$HERE/../../tools/chaos/campaign" --bin "$BIN" --runs "$RUNS" --seed "$SEED" \
    --budget "$BUDGET" --json "$TMP/runs.jsonl" >"$TMP/out" 2>&1
rc=$?
sed 's/^/#   /' "$TMP/out"
echo "# $(( $(now_ms) - T )) ms"
check "campaign exits 0: no WRONG result, no hang (rc $rc)" [ "$rc" = 0 ]
count() { c=$(grep -c "$1" "$TMP/runs.jsonl" 2>/dev/null); echo "${c:-0}"; }
total=$(count .)
wrong=$(count '"class": "WRONG"'); hang=$(count '"class": "hang"')
exact=$(count '"class": "exact"'); honest=$(count '"class": "honest"')
landed=$(count '"landed": true')
check "at least 5 runs done ($total)" [ "$total" -ge 5 ]
check "every run classified: $exact exact + $honest honest + $wrong WRONG + $hang hang = $total" \
    [ $((exact + honest + wrong + hang)) = "$total" ]
check "no WRONG result ($wrong) and no hang ($hang)" [ "$wrong/$hang" = 0/0 ]
check "faults landed inside the work in $landed of $total runs (>= 1/4)" [ $((4 * landed)) -ge "$total" ]
check "a recovery mode recovered at least one landed fault exactly" \
    grep -q '"class": "exact", "landed": true' "$TMP/runs.jsonl"

"$PY" "$HERE/../../tools/chaos/campaign" --bin "$BIN" --runs 1 --seed "$SEED" --kinds freeze --hold \
    --modes jacobi/cr --run-timeout $((30 + 10 * $(hb_ms) / 1000)) --json "$TMP/freeze.jsonl" >"$TMP/fz" 2>&1
rc=$?
grep -E '^ *0 ' "$TMP/fz" | sed 's/^/#   /'
check "freeze: a rank stopped for good neither hangs the job nor changes its result (rc $rc)" \
    grep -q '"class": "exact", "landed": true' "$TMP/freeze.jsonl"

# Without a recovery mode a survivor ends the job at once with 76 when a rank
# is lost: the launcher's summary must still name the loss ("work lost"),
# else the campaign counts the exit as WRONG (it once ended without one).
"$PY" "$HERE/../../tools/chaos/campaign" --bin "$BIN" --runs 1 --seed "$SEED" --kinds freeze \
    --modes jacobi/none --run-timeout $((30 + 10 * $(hb_ms) / 1000)) --json "$TMP/none.jsonl" >"$TMP/nz" 2>&1
rc=$?
grep -E '^ *0 ' "$TMP/nz" | sed 's/^/#   /'
check "freeze under recovery=none: an honest exit that names what was lost (rc $rc)" \
    grep -q '"class": "\(honest\|exact\)"' "$TMP/none.jsonl"
finish
