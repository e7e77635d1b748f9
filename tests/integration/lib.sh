# Shared helpers for the integration tests (POSIX sh). Source it.
# Every wait is bounded; every test cleans up its processes on exit.
#
# Rules these helpers serve (tests pass by construction, never by luck):
#  - A test that cannot run here calls `skip "why"`: it prints "SKIP: why"
#    and exits 77, which ctest reports as skipped (phx_it sets
#    SKIP_RETURN_CODE 77 in tests/integration/CMakeLists.txt).
#  - A kill lands inside the work because the job waits for it, never
#    because a sleep happened to fit. The job holds its work open on a gate
#    (a go file: `busy --hold-until FILE`, `tdk --hold FILE`); the test
#    waits for an event-log line saying the work is in place
#    (`wait_event`), kills, waits for the victim to be gone (`gone`), then
#    opens the gate (`gate_open`). Jobs write the JSON event log with
#    PHX_EVENTLOG="$TMP/ev.%r.jsonl" (core/eventlog.h; events listed in
#    tools/chaos/README.md).
#  - Time bounds derive from configuration: `hb_ms` is the heartbeat
#    timeout delta (PHX_HB_TIMEOUT, default 1000 ms), and a bound says how
#    many deltas it allows. No bound decides a result by being short.
#
#   skip REASON                     exit 77 with "SKIP: REASON"
#   check DESC CMD... / todo DESC CMD...
#                                   a check; todo: one for a known open
#                                   hole, printed but not counted failed
#   wait_event FILES REGEX MS       wait up to MS for a line matching the
#                                   extended REGEX in FILES (a glob; quote
#                                   it); prints the line; 1 on timeout
#   event_count FILES REGEX         lines matching REGEX in FILES
#   gate_new NAME                   prints a fresh gate path in $TMP (closed)
#   gate_open FILE                  opens it (atomic create)
#   gone PID MS                     wait up to MS for PID to die (a zombie
#                                   counts as dead); 1 on timeout
#   hb_ms                           delta in ms
#   now_ms                          CLOCK_REALTIME in ms
PASS=0; FAIL=0; PIDS=""
TMP=$(mktemp -d "${TMPDIR:-/tmp}/phx-it.XXXXXX")
cleanup() {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
    # PHX_IT_KEEP=1 keeps the event logs and outputs of a failing run.
    if [ -n "${PHX_IT_KEEP:-}" ] && [ "$FAIL" != 0 ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
    # port_base runs in $(...): find this test's reservations by pid
    for r in "${TMPDIR:-/tmp}"/phx-ports/*/pid; do
        [ "$(cat "$r" 2>/dev/null)" = $$ ] && rm -rf "${r%/pid}"
    done
    return 0
}
trap cleanup EXIT INT TERM

ok()   { PASS=$((PASS + 1)); echo "ok   - $*"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL - $*"; }
check() { desc=$1; shift; if "$@"; then ok "$desc"; else fail "$desc"; fi; }
# todo DESC CMD...: a check for a known open hole: reported, not failed.
todo() { desc=$1; shift; if "$@"; then ok "$desc"; else echo "todo - $desc (known open hole)"; fi; }
finish() { echo "$PASS passed, $FAIL failed"; [ "$FAIL" -eq 0 ]; }

# port_base: a base P such that P..P+255 are free now and reserved for
# this test. Bases lie below the kernel's ephemeral range (outgoing
# connections and srun's own listeners take ports from it), and a
# reservation (by pid) in ${TMPDIR:-/tmp}/phx-ports/ keeps a concurrent copy of the
# suite off them; a reservation whose owner is gone is taken over.
port_base() {
    _lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    _n=$(( (_lo - 10000) / 256 - 1 )); _d=${TMPDIR:-/tmp}/phx-ports
    mkdir -p "$_d" 2>/dev/null
    _i=$(( $$ % _n )); _t=0
    while [ $_t -lt $_n ]; do
        _b=$(( 10000 + ((_i + _t) % _n) * 256 )); _t=$((_t + 1))
        if ! mkdir "$_d/$_b" 2>/dev/null; then
            _o=$(cat "$_d/$_b/pid" 2>/dev/null)
            [ -n "$_o" ] && kill -0 "$_o" 2>/dev/null && continue
            rm -rf "$_d/$_b"; mkdir "$_d/$_b" 2>/dev/null || continue
        fi
        echo $$ >"$_d/$_b/pid"
        if python3 -c '
import socket, sys
b = int(sys.argv[1])
for p in range(b, b + 256):
    s = socket.socket(); s.bind(("0.0.0.0", p)); s.close()' "$_b" 2>/dev/null; then
            echo "$_b"; return 0
        fi
    done
    echo "port_base: no free block of 256 ports below $_lo" >&2; return 1
}

# wait_for SECONDS CMD...: poll CMD every 50 ms until it succeeds.
wait_for() {
    t=$(( $1 * 20 )); shift
    while [ "$t" -gt 0 ]; do "$@" && return 0; sleep 0.05; t=$((t - 1)); done
    return 1
}

# A TCP port accepts connections.
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

skip() { echo "SKIP: $*"; exit 77; }

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
hb_ms() { echo "${PHX_HB_TIMEOUT:-1000}"; }

# Lines of the files matching a glob (unmatched globs are skipped).
event_lines() {
    for f in $1; do [ -f "$f" ] && grep -Eh -- "$2" "$f"; done 2>/dev/null
}
event_count() { event_lines "$1" "$2" | wc -l; }
wait_event() {
    _end=$(( $(now_ms) + $3 ))
    while :; do
        _l=$(event_lines "$1" "$2" | head -n 1)
        [ -n "$_l" ] && { echo "$_l"; return 0; }
        [ "$(now_ms)" -ge "$_end" ] && return 1
        sleep 0.02
    done
}

gate_new() { rm -f "$TMP/gate.$1"; echo "$TMP/gate.$1"; }
# Written aside and renamed: a poller sees no file or the whole file.
gate_open() { : >"$1.tmp" && mv -f "$1.tmp" "$1"; }

gone() {
    _end=$(( $(now_ms) + $2 ))
    while kill -0 "$1" 2>/dev/null && ! grep -q '^[0-9]* (.*) [ZX]' "/proc/$1/stat" 2>/dev/null; do
        [ "$(now_ms)" -ge "$_end" ] && return 1
        sleep 0.01
    done
}

# With DIR (event logs DIR/ev.RANK.jsonl) and N (ranks) set by the test:
# logged PATTERN: some node logged it.
logged() { grep -qs "$1" "$DIR"/ev.*.jsonl; }
# settled MIN: every node's last checkpoint round is committed, MIN or more
# committed in all (the job's start is the first).
settled() {
    for r in $(seq 0 $((N - 1))); do
        f=$DIR/ev.$r.jsonl
        [ "$(grep -Eo '"ev":"ckpt_(begin|commit)"' "$f" 2>/dev/null | tail -1)" = '"ev":"ckpt_commit"' ] &&
            [ "$(grep -c '"ev":"ckpt_commit"' "$f")" -ge "$1" ] || return 1
    done
}
