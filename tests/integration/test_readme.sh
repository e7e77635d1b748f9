#!/bin/bash
# Every ```sh block of README.md runs as written, each in its own shell
# (sh -e: any failing command fails the block), from a directory laid out
# like the repository root after ./build.sh (build/ and tools/ linked).
# Skipped, and said so: blocks calling ./build.sh (the build and this test
# suite themselves) and the Docker blocks (it_docker runs those where an
# engine answers).
# Usage: test_readme.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$BIN/.." && pwd)
HB_MS=${PHX_HB_TIMEOUT:-1000}
LIMIT=$(( 60 + 20 * HB_MS / 1000 ))   # per block; a hung block is cut off (rc 124)

W=$TMP/root
mkdir -p "$W" && ln -s "$BUILD" "$W/build" && ln -s "$SRC/tools" "$W/tools" || exit 1
awk -v d="$TMP" '
    /^```sh$/ { n++; f = sprintf("%s/block.%02d.sh", d, n); inb = 1; next }
    /^```$/ && inb { inb = 0; close(f); next }
    inb { print > f }' "$SRC/README.md"
ls "$TMP"/block.*.sh >/dev/null 2>&1 || { fail "README.md has sh blocks"; finish; exit; }

# expect BLOCK-FILE: the results a block must print, by the commands it has.
expect() {
    ! grep -q "WRONG" "$TMP/out" || return 1
    grep -q "fib 20" "$1" && { grep -q "fib(20) = 6765 on 8 nodes .*OK" "$TMP/out" || return 1; }
    grep -q "ring 1000" "$1" && { grep -q "ring: 4 nodes x 1000 laps = 4000 hops .*OK" "$TMP/out" || return 1; }
    grep -q "fib 18" "$1" && { grep -q "fib(18) = 2584 on 4 nodes .*OK" "$TMP/out" || return 1; }
    grep -q -- "--phx-help" "$1" && { grep -q -- "--phx-hb-timeout" "$TMP/out" || return 1; }
    grep -q "busy 12" "$1" && { grep -q "busy: done after 12 s .*1 failed" "$TMP/out" || return 1; }
    return 0
}

for b in "$TMP"/block.*.sh; do
    first=$(grep -v '^[[:space:]]*#' "$b" | head -1 | cut -c1-60)
    if grep -q '\./build\.sh' "$b"; then
        echo "# skip: '$first' (the build and the test suite themselves)"; continue
    fi
    if grep -q 'tools/docker/' "$b"; then
        echo "# skip: '$first' (Docker; it_docker runs it where an engine answers)"; continue
    fi
    (cd "$W" && timeout -k 5 "$LIMIT" sh -e "$b") >"$TMP/out" 2>&1; rc=$?
    check "README $(basename "$b" .sh) runs as written: '$first' (rc $rc)" [ "$rc" = 0 ]
    check "README $(basename "$b" .sh) prints the right results" expect "$b"
    [ "$rc" = 0 ] && expect "$b" || sed 's/^/#   /' "$TMP/out" | tail -30
done
finish
