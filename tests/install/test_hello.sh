#!/bin/bash
# Building a program against an installed Phalanx, as a user outside this
# repository does (docs/install.md): `cmake --install` to a fresh prefix,
# examples/hello copied out of the tree, built
#   (a) with phxcc,
#   (b) with pkg-config,
#   (c) with find_package(Phalanx) (its own CMakeLists.txt),
#   (d) with find_package against the static library (Phalanx::phalanx_static),
# and each run on 2 nodes by the installed phx, PATH holding only the prefix
# and the system. Then the prefix is moved and phxcc still builds a program
# that runs (relocatable). Nothing may point back into the build tree.
# Usage: test_hello.sh BUILD_DIR
set -u
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$SRC/tests/integration/lib.sh"
HB_MS=$(hb_ms)
LIMIT=$(( 30 + 10 * HB_MS / 1000 ))   # one 2-node hello, start to end
P=$TMP/prefix
export PATH=$P/bin:/usr/local/bin:/usr/bin:/bin
unset CC PKG_CONFIG_PATH CMAKE_PREFIX_PATH LD_LIBRARY_PATH

cmake --install "$BUILD" --prefix "$P" >"$TMP/install.log" 2>&1; rc=$?
check "cmake --install to a fresh prefix (rc $rc)" [ "$rc" = 0 ]
[ "$rc" = 0 ] || { sed 's/^/#   /' "$TMP/install.log" | tail -20; finish; exit; }
for f in bin/phx bin/phxcc bin/phx-ring lib/libphalanx.so lib/libphalanx.a include/phalanx/phalanx.h \
         lib/pkgconfig/phalanx.pc lib/cmake/Phalanx/PhalanxConfig.cmake share/phalanx/examples/hello/hello.c; do
    check "installed: $f" [ -e "$P/$f" ]
done
check "phx is the installed one" [ "$(command -v phx)" = "$P/bin/phx" ]

W=$TMP/user
mkdir -p "$W" && cp "$SRC/examples/hello/hello.c" "$SRC/examples/hello/CMakeLists.txt" "$W/" || exit 1
cd "$W" || exit 1
check "the installed example is the README's" cmp -s hello.c "$P/share/phalanx/examples/hello/hello.c"

# runs NAME [ENV...]: phx run -n 2 ./NAME prints rank 0's line and exits 0.
runs() {
    local prog=$1; shift
    env "$@" timeout -k 5 "$LIMIT" phx run -n 2 "./$prog" >"$TMP/$prog.out" 2>&1; local rc=$?
    grep -q "hello: 2 of 2 ranks said hello" "$TMP/$prog.out" && [ "$rc" = 0 ] && return 0
    echo "#   rc $rc"; sed 's/^/#   /' "$TMP/$prog.out" | tail -20
    return 1
}
# Every shared library the program loads from the prefix or the system, none
# from the build tree.
no_build_refs() {
    ! ldd "$1" | grep -q "$BUILD" && ! readelf -d "$1" | grep -q "$BUILD"
}
loads_from_prefix() { ldd "$1" | grep -q "libphalanx.so.0 => $P/lib/libphalanx.so.0"; }

# (a) phxcc
cmd=$(phxcc --showme hello.c -o hello_cc)
echo "# phxcc --showme: $cmd"
check "a: phxcc --showme prints the command: cc, the prefix's include dir, -lphalanx" \
    eval '[[ "$cmd" == "cc -I$P/include hello.c -o hello_cc -L$P/lib "*"-lphalanx"* ]]'
check "a: phxcc --showme honours CC" eval '[[ "$(CC=gcc phxcc --showme x.c)" == "gcc -I$P/include x.c "* ]]'
check "a: phxcc --showme -c leaves the link flags out" \
    eval '[ "$(phxcc --showme -c hello.c)" = "cc -I$P/include -c hello.c" ]'
check "a: phxcc hello.c -o hello_cc" phxcc hello.c -o hello_cc
check "a: hello_cc loads libphalanx from the prefix" loads_from_prefix hello_cc
check "a: hello_cc has jemalloc as its malloc (linked before libc)" \
    eval 'readelf -d hello_cc | grep -q "NEEDED.*libjemalloc.so.2"'
check "a: nothing of the build tree in hello_cc" no_build_refs hello_cc
check "a: phx run -n 2 ./hello_cc" runs hello_cc

# (b) pkg-config (no rpath from pkg-config: the loader is told where)
export PKG_CONFIG_PATH=$P/lib/pkgconfig
check "b: pkg-config knows phalanx $(pkg-config --modversion phalanx 2>&1)" pkg-config --exists phalanx
# shellcheck disable=SC2046
check "b: cc \$(pkg-config --cflags phalanx) hello.c \$(pkg-config --libs phalanx)" \
    cc $(pkg-config --cflags phalanx) hello.c -o hello_pc $(pkg-config --libs phalanx)
check "b: phx run -n 2 ./hello_pc" runs hello_pc LD_LIBRARY_PATH="$P/lib"
unset PKG_CONFIG_PATH

# (c) find_package(Phalanx), the example's own CMakeLists.txt
cmake -S . -B b -DCMAKE_PREFIX_PATH="$P" >"$TMP/c.log" 2>&1 && cmake --build b >>"$TMP/c.log" 2>&1; rc=$?
check "c: cmake with find_package(Phalanx) builds hello (rc $rc)" [ "$rc" = 0 ]
[ "$rc" = 0 ] || sed 's/^/#   /' "$TMP/c.log" | tail -20
cp b/hello hello_cmake 2>/dev/null
check "c: hello_cmake loads libphalanx from the prefix" loads_from_prefix hello_cmake
check "c: nothing of the build tree in hello_cmake" no_build_refs hello_cmake
check "c: phx run -n 2 ./hello_cmake" runs hello_cmake

# (d) the static library through the CMake package
mkdir -p st && cp hello.c st/ && sed 's/Phalanx::phalanx)/Phalanx::phalanx_static)/' CMakeLists.txt >st/CMakeLists.txt
cmake -S st -B st/b -DCMAKE_PREFIX_PATH="$P" >"$TMP/d.log" 2>&1 && cmake --build st/b >>"$TMP/d.log" 2>&1; rc=$?
check "d: find_package(Phalanx) + Phalanx::phalanx_static builds hello (rc $rc)" [ "$rc" = 0 ]
[ "$rc" = 0 ] || sed 's/^/#   /' "$TMP/d.log" | tail -20
cp st/b/hello hello_static 2>/dev/null
check "d: hello_static does not load libphalanx.so" eval '! readelf -d hello_static | grep -q libphalanx'
check "d: phx run -n 2 ./hello_static" runs hello_static

# Relocated: the whole prefix moved; phxcc finds its headers and library there.
mv "$P" "$TMP/moved"
P=$TMP/moved
export PATH=$P/bin:/usr/local/bin:/usr/bin:/bin
check "moved: phxcc --showme names the new place" eval '[[ "$(phxcc --showme x.c)" == "cc -I$P/include x.c -L$P/lib "* ]]'
check "moved: phxcc hello.c -o hello_moved" phxcc hello.c -o hello_moved
check "moved: phx run -n 2 ./hello_moved" runs hello_moved
check "moved: pkg-config's include dir follows" \
    eval '[ "$(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --variable=includedir phalanx)" = "$P/lib/pkgconfig/../../include" ]'
finish
