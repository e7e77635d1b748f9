#!/bin/sh
# Phalanx build entry point.
#   ./build.sh              install missing packages, build, run apps/ring on 4 local nodes
#   ./build.sh test         build and run every test (unit + integration)
#   ./build.sh test --asan  the same under AddressSanitizer + UBSan
#   ./build.sh test --tsan  the same under ThreadSanitizer
#   ./build.sh bench        run the benchmarks (tools/bench/bench.sh)
#   ./build.sh build        build only
#   ./build.sh install [PREFIX]  build, then install under PREFIX (default /usr/local):
#                           libphalanx, headers, phx, phxcc, phalanx.pc, the CMake package
set -eu
CALLER_PWD=$PWD   # a relative install PREFIX is the caller's
cd "$(dirname "$0")"

PKGS="build-essential cmake pkg-config libuv1-dev libjemalloc-dev liburcu-dev libssl-dev libisal-dev libcmocka-dev python3 clang libmicrohttpd-dev prometheus python3-matplotlib curl iproute2 openssh-server openssh-client munge slurmctld slurmd slurm-client"

missing_pkgs() {
    missing=""
    for p in $PKGS; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
    done
}

install_missing() {
    missing_pkgs
    [ -z "$missing" ] && return 0
    # Two copies at once (a second suite beside the first) install one
    # after the other: apt's own locks fail instead of waiting.
    exec 9>"${TMPDIR:-/tmp}/phx-build-apt.lock"
    flock 9
    missing_pkgs
    if [ -z "$missing" ]; then
        flock -u 9
        return 0
    fi
    echo "build.sh: installing:$missing"
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    elif command -v sudo >/dev/null 2>&1; then
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    else
        echo "build.sh: missing Debian packages:$missing" >&2
        echo "build.sh: install them as root: apt-get install$missing" >&2
        exit 1
    fi
    flock -u 9
}

JOBS=$(nproc 2>/dev/null || echo 2)

build() {   # build DIR [cmake args...]
    dir=$1; shift
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
    cmake --build "$dir" -j"$JOBS"
}

cmd=${1:-run}
[ $# -gt 0 ] && shift
install_missing
case "$cmd" in
run)
    build build
    echo "== apps/ring on 4 local nodes =="
    build/bin/phx run -n 4 build/bin/ring 1000
    ;;
build)
    build build
    ;;
test)
    dir=build; san=""
    case "${1:-}" in
    --asan) dir=build-asan; san=asan ;;
    --tsan) dir=build-tsan; san=tsan ;;
    "") ;;
    *) echo "usage: ./build.sh test [--asan|--tsan]" >&2; exit 2 ;;
    esac
    build "$dir" -DPHX_SANITIZE="$san"
    # Sanitizers slow every thread several-fold: the failure-detection
    # timeout the multi-node tests derive their waits from scales with it.
    [ -n "$san" ] && export PHX_HB_TIMEOUT=${PHX_HB_TIMEOUT:-3000}
    cd "$dir"
    # ASan: leaks are errors; TSan: the whole suite runs, reports fail a test.
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
    ctest --output-on-failure --timeout 600 -j1
    ;;
install)
    [ $# -le 1 ] || { echo "usage: ./build.sh install [PREFIX]" >&2; exit 2; }
    prefix=${1:-/usr/local}
    case $prefix in /*) ;; *) prefix=$CALLER_PWD/$prefix ;; esac
    build build
    # A prefix this user cannot write (/usr/local as non-root) goes through sudo.
    p=$prefix
    while [ ! -e "$p" ]; do p=$(dirname "$p"); done
    if [ -w "$p" ] || [ "$(id -u)" = 0 ]; then
        cmake --install build --prefix "$prefix"
    elif command -v sudo >/dev/null 2>&1; then
        sudo cmake --install build --prefix "$prefix"
    else
        echo "build.sh: cannot write $prefix: run as root or pick another PREFIX" >&2
        exit 1
    fi
    echo "installed under $prefix: build with $prefix/bin/phxcc, run with $prefix/bin/phx run"
    ;;
bench)
    build build
    exec tools/bench/bench.sh build "$@"
    ;;
*)
    echo "usage: ./build.sh [run|build|test [--asan|--tsan]|install [PREFIX]|bench]" >&2
    exit 2
    ;;
esac
