# Shared helpers for the integration tests (POSIX sh). Source it.
# Every wait is bounded; every test cleans up its processes on exit.
PASS=0; FAIL=0; PIDS=""
TMP=$(mktemp -d "${TMPDIR:-/tmp}/phx-it.XXXXXX")
cleanup() { for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM

ok()   { PASS=$((PASS + 1)); echo "ok   - $*"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL - $*"; }
check() { desc=$1; shift; if "$@"; then ok "$desc"; else fail "$desc"; fi; }
finish() { echo "$PASS passed, $FAIL failed"; [ "$FAIL" -eq 0 ]; }

# A port base unlikely to collide with a concurrent run.
port_base() { echo $((20000 + ($$ * 7) % 30000)); }

# wait_for SECONDS CMD...: poll CMD every 50 ms until it succeeds.
wait_for() {
    t=$(( $1 * 20 )); shift
    while [ "$t" -gt 0 ]; do "$@" && return 0; sleep 0.05; t=$((t - 1)); done
    return 1
}

# A TCP port accepts connections.
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
