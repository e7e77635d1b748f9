# Shared by the launcher tests (sourced after T, PASS and FAIL are set):
# pass/fail reporting and polling for processes.
ok() { PASS=$((PASS + 1)); echo "ok   $1"; }
bad() {
    FAIL=$((FAIL + 1)); echo "FAIL $1"
    for f in out err; do [ -s "$T/$f" ] && { echo "  --- $f:"; head -20 "$T/$f" | cut -c1-200 | sed 's/^/  /'; }; done
}
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
# wait_for COND [TENTHS]: polls instead of sleeping a fixed time
wait_for() {
    _n=0
    while ! eval "$1"; do
        _n=$((_n + 1)); [ "$_n" -ge "${2:-100}" ] && return 1
        sleep 0.1
    done
}
# A zombie waiting for a busy init counts as dead.
alive() { kill -0 "$1" 2>/dev/null && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
none_alive() { for _p in "$@"; do alive "$_p" && return 1; done; return 0; }
