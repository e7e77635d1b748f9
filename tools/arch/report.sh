#!/bin/bash
# The architecture report of docs/architecture.md, for the tree it sits in:
# lines per file, includes that point up, circles between core files,
# hand-written byte layouts, the decoders under fuzzing and the schedules
# the explorers run. Prints a markdown table, then the lists behind each
# figure.
#
# Usage: tools/arch/report.sh [--check] [--build DIR] [--quiet]
#   --build DIR  a configured and built tree (default: build/). The call
#                graph reads its core object files with nm, and the
#                schedule counts come from its last ctest logs. Without it
#                those rows say what is missing.
#   --check      exit 1 if a rule that must hold is broken: an include that
#                points up or sideways, a core/ or net/ file over 1,000
#                lines, an include circle between core/ headers, or (when
#                the build has the runtime's objects) a call circle across
#                core services. Under a second of CPU; ctest runs it
#                (arch_rules).
#   --quiet      with --check: print only the broken rules.
#
# Layers, lowest first: base < net, ft < core < ext < tools, apps, examples.
# net and ft are siblings and include neither each other nor anything above
# base; tools, apps and examples may include each other. Tests (tests/ and
# any test_*.c) are outside the layering and not counted.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$ROOT/build
CHECK=0
QUIET=0
while [ $# -gt 0 ]; do
    case $1 in
        --check) CHECK=1 ;;
        --quiet) QUIET=1 ;;
        --build) BUILD=$(cd "${2:-}" 2>/dev/null && pwd) && [ -n "${2:-}" ] || { echo "report.sh: no build dir ${2:-}" >&2; exit 2; }; shift ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "report.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
cd "$ROOT" || exit 2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The project's sources: git's list when this is a checkout, else a find.
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    git ls-files -co --exclude-standard -- '*.c' '*.h' | while read -r f; do [ -f "$f" ] && echo "$f"; done
else
    find base net ft core ext tools apps examples -name '*.[ch]' 2>/dev/null
fi | grep -vE '^(build[^/]*|tests)/|(^|/)test_[^/]*$' | sort > "$TMP/src"

# Strongly connected components of a graph given as "from to" lines on
# stdin: prints each circle (component of two or more nodes) on one line.
scc() {
    python3 -c '
import sys
sys.setrecursionlimit(10000)
g = {}
for line in sys.stdin:
    a, b = line.split()
    g.setdefault(a, set()).add(b)
    g.setdefault(b, set())
idx, low, on, st, out, n = {}, {}, set(), [], [], [0]
def visit(v):
    idx[v] = low[v] = n[0]; n[0] += 1; st.append(v); on.add(v)
    for w in sorted(g[v]):
        if w not in idx:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        c = []
        while True:
            w = st.pop(); on.discard(w); c.append(w)
            if w == v: break
        if len(c) > 1: out.append(sorted(c))
for v in sorted(g):
    if v not in idx: visit(v)
for c in sorted(out): print(" ".join(c))
'
}

# ---- 1. lines per file ------------------------------------------------------
grep -E '^(core|net)/' "$TMP/src" | xargs wc -l | grep -v ' total$' |
    sort -k1,1nr -k2 | awk '{printf "%s %s\n", $1, $2}' > "$TMP/lines"
awk '$1 > 1000' "$TMP/lines" > "$TMP/big"
N_BIG=$(wc -l < "$TMP/big")
TOP=$(head -1 "$TMP/lines" | awk '{printf "%s (%s)", $2, $1}')

# ---- 2. includes that point up ---------------------------------------------
# Every #include "DIR/..." whose top folder's layer is above the including
# file's, or the other sibling of net/ft. A bare #include "x.h" is found
# beside the file, in its own folder, so it never crosses a layer.
xargs grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[^"/]+/[^"]+"' < "$TMP/src" |
awk -F: '
function rank(d) {
    if (d == "base") return 0; if (d == "net" || d == "ft") return 1
    if (d == "core") return 2; if (d == "ext") return 3
    if (d == "tools" || d == "apps" || d == "examples") return 4
    return -1
}
{
    f = $1; line = $2; top = f; sub(/\/.*/, "", top)
    inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
    t = inc; sub(/\/.*/, "", t)
    r = rank(top); rt = rank(t)
    if (r < 0 || rt < 0) next
    if (rt > r || (r == 1 && rt == 1 && t != top))
        printf "%s:%s: %s -> %s (%s)\n", f, line, top, t, inc
}' > "$TMP/up"
N_UP=$(wc -l < "$TMP/up")

# ---- 3. circles between core files -------------------------------------------
# (a) Includes: header -> header inside core/ (a circle there is a real
# compile-order knot, and must be 0).
grep -E '^core/.*\.h$' "$TMP/src" | while read -r h; do
    grep -oE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"core/[^"]+\.h"' "$h" |
        sed -E 's/.*"(core\/[^"]+)"/\1/' | sed "s|^|$h |"
done | awk '$1 != $2' > "$TMP/inc_edges"
scc < "$TMP/inc_edges" > "$TMP/inc_circles"
N_INC_CIRCLE=$(wc -l < "$TMP/inc_circles")

# (b) Calls: object A -> object B when A uses a global symbol B defines (nm
# over the runtime library's objects). The files of one service count as
# one: core/cr*.c and ckpt_disk.c are recovery=cr, core/mlog*.c are
# message logging (a service's own files call each other both ways through
# its private header, by design).
OBJ=$BUILD/core/CMakeFiles/phalanx.dir
CALL_FILES="-"; CALL_SVC="-"; CALL_NOTE="no build: run with --build DIR"
# Only objects whose source is still in core/ count (a build dir can keep
# the object of a file since removed).
OBJS=""
if [ -d "$OBJ" ] && command -v nm >/dev/null; then
    for o in "$OBJ"/*.c.o; do
        [ -e "$o" ] || continue
        b=${o##*/}
        [ -f "core/${b%.o}" ] && OBJS="$OBJS $b"
    done
fi
if [ -n "$OBJS" ]; then
    (cd "$OBJ" &&
     nm -g --defined-only $OBJS | awk '/:$/{f=$1; sub(/\.c\.o:$/,"",f); next} NF==3{print $3, f}' | sort > "$TMP/defs"
     nm -u $OBJS | awk '/:$/{f=$1; sub(/\.c\.o:$/,"",f); next} NF==2{print $2, f}' | sort > "$TMP/uses")
    join "$TMP/uses" "$TMP/defs" | awk '$2 != $3 {print $2, $3}' | sort -u > "$TMP/call_edges"
    scc < "$TMP/call_edges" > "$TMP/call_circles"
    sed -E 's/\b(cr_[a-z]+|ckpt_disk)\b/cr/g; s/\bmlog_[a-z]+\b/mlog/g' "$TMP/call_edges" |
        awk '$1 != $2' | sort -u | scc > "$TMP/svc_circles"
    NOBJ=$(wc -w <<<"$OBJS")
    CALL_FILES="$(tr ' ' '\n' < "$TMP/call_circles" | grep -c .) of $NOBJ files on circles"
    CALL_SVC="$(wc -l < "$TMP/svc_circles") circle(s) across services"
    CALL_NOTE="nm over ${OBJ#"$ROOT"/}"
fi

# ---- 4. hand-written byte layouts -------------------------------------------
# The heuristic, over the library's sources (core/ net/ ft/ ext/; base/ holds
# the codec, base/phx_wire.h; programs and tools are not counted): a line
# counts when it
#   (a) calls the raw primitives phx_put_le16/32/64 or phx_get_le16/32/64
#       (the codec's cursor, phx_wenc_* / phx_wdec_*, is the way), or
#   (b) reaches into a buffer at a literal offset: NAME[K] with K >= 1,
#       NAME[K + x], or NAME + K as a call argument, where NAME is one of
#       the names message code gives its bytes (b buf p q pre hdr m msg out
#       pkt frame wire data payload raw). Declarations (uint8_t m[17]),
#       comments and character code (a 'c' literal on the line) do not count.
# It misses layouts spelled with other names and may count a byte array
# that is not a message; the list below shows every line it counts.
BUFS='(b|buf|p|q|pre|hdr|m|msg|out|pkt|frame|wire|data|payload|raw)'
grep -E '^(core|net|ft|ext)/' "$TMP/src" | xargs grep -nE \
    "phx_(put|get)_le(16|32|64)\(|\b$BUFS\[([1-9][0-9]*|[0-9]+ *\+[^]]*)\]|(\w\(|, *)$BUFS *\+ *[0-9]+ *[,)]" /dev/null |
    grep -vE "(u?int[0-9]*_t|char|int|long|size_t) +\*?$BUFS\[[^]]*\]" |
    grep -vE "'(\\\\?.|[^'])'|^[^:]+:[0-9]+:[[:space:]]*(/?\*|//)" > "$TMP/raw"
N_RAW_LINES=$(wc -l < "$TMP/raw")
N_RAW_FILES=$(cut -d: -f1 "$TMP/raw" | sort -u | wc -l)

# ---- 5. decoders under fuzzing ------------------------------------------------
# fuzz_msg's families are its target enum (tests/fuzz/fuzz_msg.h); fuzz_frame
# drives the frame, handshake and link decoders.
FZ_LIST=""
if [ -f tests/fuzz/fuzz_msg.h ]; then
    FZ_LIST=$(sed -n '/^enum {/,/FZ_NTARGETS/p' tests/fuzz/fuzz_msg.h |
        grep -oE '^[[:space:]]*FZ_[A-Z]+' | grep -v FZ_NTARGETS | sed 's/^[[:space:]]*FZ_//' | tr 'A-Z' 'a-z' | paste -sd' ')
fi
FR_LIST=""
if [ -f tests/fuzz/fuzz_frame.c ]; then
    for d in frame auth link; do
        grep -q "phx_${d}_" tests/fuzz/fuzz_frame.c && FR_LIST="$FR_LIST $d"
    done
fi
N_FZ=$(( $(wc -w <<<"$FZ_LIST") + $(wc -w <<<"$FR_LIST") ))
N_DEC=$(grep -ohE '\bphx_[a-z0-9_]*(_dec|_decode|_parse|_peek|_scan|_store|_take)\(' tests/fuzz/fuzz_msg.c tests/fuzz/fuzz_frame.c 2>/dev/null | sort -u | wc -l)

# ---- 6. schedules the explorers run ---------------------------------------------
# Unit tests that explore schedules print "... N schedules ..." lines; the
# figures are read from the build's last ctest log, so they cover the tests
# that run ran (ctest -L unit first for all of them); this script never runs
# a test.
LOGS=$(ls "$BUILD"/Testing/Temporary/LastTest*.log 2>/dev/null)
SCHED="see tests"
if [ -n "$LOGS" ]; then
    # LastTest.log names each test in a "N/M Testing: NAME" line before its output.
    awk '/^[0-9]+\/[0-9]+ Testing: /{t=$3} /[0-9]+ schedules/{print t": "$0}' $LOGS |
        sort -u > "$TMP/sched"
    if [ -s "$TMP/sched" ]; then
        SCHED=$(grep -oE '^[^:]+: .*[^0-9]([0-9]+) schedules' "$TMP/sched" |
            sed -E 's/^([^:]+): .*[^0-9]([0-9]+) schedules$/\1 \2/' |
            awk '{s[$1]+=$2} END{for (t in s) print t, s[t]}' | sort | paste -sd';' | sed 's/;/; /g')
    fi
fi

# ---- the table ------------------------------------------------------------------
if [ "$QUIET" = 0 ]; then
    cat <<EOF
| what | now |
|---|---|
| lines per file, core/ and net/: largest | $TOP |
| core/ and net/ files over 1,000 lines (goal 0) | $N_BIG |
| includes that point up or sideways (goal 0) | $N_UP |
| include circles between core/ headers (goal 0) | $N_INC_CIRCLE |
| call circles between core objects ($CALL_NOTE) | $CALL_FILES; $CALL_SVC (a service's files as one) |
| hand-written byte layouts (heuristic below; goal 0) | $N_RAW_LINES lines in $N_RAW_FILES files |
| decoders under fuzzing | $N_FZ families: fuzz_frame:$FR_LIST; fuzz_msg: $FZ_LIST ($N_DEC decode functions called) |
| schedules the explorers run | $SCHED |

## Largest files in core/ and net/
EOF
    head -8 "$TMP/lines"
    echo; echo "## Over 1,000 lines"; [ -s "$TMP/big" ] && cat "$TMP/big" || echo "none"
    echo; echo "## Includes that point up or sideways"; [ -s "$TMP/up" ] && cat "$TMP/up" || echo "none"
    echo; echo "## Include circles between core/ headers"; [ -s "$TMP/inc_circles" ] && cat "$TMP/inc_circles" || echo "none"
    echo; echo "## Call circles between core objects"
    if [ -f "$TMP/call_edges" ]; then
        echo "file by file:"; [ -s "$TMP/call_circles" ] && cat "$TMP/call_circles" || echo "none"
        echo "a service's files as one:"; [ -s "$TMP/svc_circles" ] && cat "$TMP/svc_circles" || echo "none"
    else
        echo "not measured (no objects under $OBJ)"
    fi
    echo; echo "## Hand-written byte layouts (lines the heuristic counts)"; [ -s "$TMP/raw" ] && cat "$TMP/raw" || echo "none"
    echo; echo "## Schedules (from the last ctest logs)"; [ -s "$TMP/sched" ] 2>/dev/null && cat "$TMP/sched" || echo "see tests"
fi

if [ "$CHECK" = 1 ]; then
    bad=0
    [ "$N_UP" = 0 ] || { echo "FAIL: $N_UP include(s) point up or sideways:"; cat "$TMP/up"; bad=1; }
    [ "$N_BIG" = 0 ] || { echo "FAIL: core/ or net/ file(s) over 1,000 lines:"; cat "$TMP/big"; bad=1; }
    [ "$N_INC_CIRCLE" = 0 ] || { echo "FAIL: include circle(s) between core/ headers:"; cat "$TMP/inc_circles"; bad=1; }
    if [ -s "$TMP/svc_circles" ]; then
        echo "FAIL: call circle(s) across core services (nm over ${OBJ#"$ROOT"/}):"; cat "$TMP/svc_circles"; bad=1
    fi
    [ "$bad" = 0 ] && [ "$QUIET" = 0 ] && echo "arch rules: ok"
    exit $bad
fi
