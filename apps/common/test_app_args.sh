#!/bin/sh
# Every example app parses its arguments strictly through apps/common/phx_args:
# --help, whole-string numbers with ranges, a usage error naming the option
# (exit 2, one message per job), and valid input accepted as before.
# usage: test_app_args.sh BIN_DIR
BIN=${1:?usage: $0 BIN_DIR}
T=$(mktemp -d "${TMPDIR:-/tmp}/phx_app_args.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
PASS=0 FAIL=0
export PHX_KILL_GRACE=1
unset PHX_RANK PHX_SIZE PHX_PEERS PHX_CONFIG
ok() { PASS=$((PASS + 1)); echo "ok   $1"; }
bad() {
    FAIL=$((FAIL + 1)); echo "FAIL $1"
    for f in out err; do [ -s "$T/$f" ] && { echo "  --- $f:"; head -8 "$T/$f" | cut -c1-200 | sed 's/^/  /'; }; done
}
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
run() { "$@" >"$T/out" 2>"$T/err"; RC=$?; }

for app in ring fib jacobi uts bc pingpong order busy agree tdk; do
    run "$BIN/$app" --help
    check "$app --help: exit 0, usage on stdout, nothing on stderr" \
        '[ $RC = 0 ] && head -1 "$T/out" | grep -q "^usage: $app " && [ ! -s "$T/err" ]'
done

# refused "APP ARGS" WANT: exit 2, the message names the option, one usage line
refused() {
    _cmd=$1 _want=$2
    set -- $_cmd
    _app=$1; shift
    run "$BIN/$_app" "$@"
    check "'$_cmd': exit 2, says '$_want'" \
        '[ $RC = 2 ] && grep -q -- "^$_app: $_want" "$T/err" && [ $(grep -c "^usage: $_app" "$T/err") = 1 ] && [ ! -s "$T/out" ]'
}
refused "jacobi -N abc" "-N wants a whole number from 4 to 65536, got 'abc'"
refused "jacobi -N 10abc" "-N wants a whole number from 4 to 65536, got '10abc'"
refused "jacobi -N 99999999999" "-N is out of range: 99999999999 is not from 4 to 65536"
refused "jacobi -i 0" "-i is out of range"
refused "jacobi -N" "-N needs a value"
refused "jacobi -X 3" "unknown argument '-X'"
refused "jacobi -H 3" "-H and -g go together"
refused "uts -r abc" "-r wants a whole number"
refused "uts -q 1.5" "-q is out of range"
refused "uts -b 4x" "-b wants a number"
refused "bc -n 30" "-n is out of range"
refused "bc -s 12z" "-s wants a whole number"
refused "fib 10abc" "N wants a whole number"
refused "ring 0" "LAPS is out of range"
refused "pingpong lat 5x" "N wants a whole number"
refused "order -V 40" "-V is out of range"
refused "agree -k abc" "-k wants a whole number"
refused "busy 1x" "SECONDS must be a number"
refused "tdk ring 0" "ring HOPS"

# Under phx run every node parses the same argv: one message per job.
run "$BIN/phx" run -n 3 "$BIN/jacobi" -N abc
check "phx run -n 3 jacobi -N abc: exit 2, one message" \
    '[ $RC = 2 ] && [ $(grep -c "jacobi: -N wants a whole number" "$T/err") = 1 ]'

# Valid input as before, runtime options in either spelling after PROGRAM.
run "$BIN/jacobi" --seq -N 16 -i 5
check "jacobi --seq -N 16 -i 5 runs" '[ $RC = 0 ] && grep -q "jacobi N=16 iters=5" "$T/out"'
run "$BIN/uts" --seq -t 1 -a 3 -d 4 -b 4 -r 19
check "uts --seq -t 1 -a 3 -d 4 -b 4 -r 19 runs" '[ $RC = 0 ] && grep -q "^Tree size = " "$T/out"'
run "$BIN/phx" run -n 2 "$BIN/fib" 12 --phx-log warn
check "fib 12 --phx-log warn (--phx-KEY VALUE after PROGRAM) runs" '[ $RC = 0 ] && grep -q "fib(12) = 144 .*OK" "$T/out"'
run "$BIN/phx" run -n 2 "$BIN/ring" 5 --phx-ft on
check "ring 5 --phx-ft on runs" '[ $RC = 0 ] && grep -q "ring: 2 nodes x 5 laps .* OK" "$T/out"'

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
