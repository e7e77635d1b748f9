#!/bin/bash
# The installed public header <phalanx/phalanx.h> stands alone (it is the
# first and only include) and compiles strictly:
#   C   -std=c11 -Wall -Wextra -Werror -pedantic (gcc, and clang if present);
#   C++ -std=c++11 (g++, and clang++ if present), same warnings: a C++
#       program calling the library links (extern "C") and runs.
# Usage: test_header.sh BUILD_DIR
set -u
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$SRC/tests/integration/lib.sh"
P=$TMP/prefix
cmake --install "$BUILD" --prefix "$P" >"$TMP/install.log" 2>&1; rc=$?
check "cmake --install to a fresh prefix (rc $rc)" [ "$rc" = 0 ]
[ "$rc" = 0 ] || { sed 's/^/#   /' "$TMP/install.log" | tail -20; finish; exit; }
W=$TMP/src
mkdir -p "$W" && cd "$W" || exit 1

# Uses a type, a macro, an error code and a call from each part of the API.
cat >use.c <<'C'
#include <phalanx/phalanx.h>
static void on_msg(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)st; (void)src; (void)m; (void)n;
    phx_exit(c, phx_rank(c) == 0 ? 0 : PHX_EXIT_USAGE);
}
int use(void);
int use(void)
{
    phx_type_t t = { "t", 0, 0, 0, 0, 0, { on_msg }, PHX_TYPE_RECV_DET };
    phx_stats_t s;
    (void)s;
    return phx_register_type(&t) == PHX_EINVAL ? PHX_OP_MAX : PHX_MAX_TAGS;
}
C
# The C++ program: the header first, nothing before it.
{ cat use.c; cat <<'C'
#include <cstdio>
int main(void)
{
    std::printf("%s|%s\n", phx_strerror(PHX_EREVOKED), phx_strerror(PHX_EINVAL));
    return use() == PHX_MAX_TAGS ? 0 : 1;
}
C
} >prog.cc

STRICT="-Wall -Wextra -Werror -pedantic"
compiles() { "$@" -I"$P/include" >"$TMP/cc.log" 2>&1 && return 0; sed 's/^/#   /' "$TMP/cc.log" | head -20; return 1; }
check "C: gcc -std=c11 $STRICT" compiles gcc -std=c11 $STRICT -c use.c -o use.o
check "C: gcc -std=c99 $STRICT" compiles gcc -std=c99 $STRICT -c use.c -o use.o
check "C++: g++ -std=c++11 $STRICT" compiles g++ -std=c++11 $STRICT -c prog.cc -o prog.o
if command -v clang >/dev/null; then
    check "C: clang -std=c11 $STRICT" compiles clang -std=c11 $STRICT -c use.c -o use.o
fi
if command -v clang++ >/dev/null; then
    check "C++: clang++ -std=c++11 $STRICT" compiles clang++ -std=c++11 $STRICT -c prog.cc -o prog.o
fi
# A C++ program links against the C library (the names are not mangled) and runs.
check "C++: g++ links prog.cc against -lphalanx" \
    compiles g++ -std=c++11 $STRICT prog.cc -o prog -L"$P/lib" -Wl,-rpath,"$P/lib" -lphalanx
out=$(./prog 2>&1); rc=$?
check "C++: the program runs and gets the library's messages ($out)" \
    eval '[ "$rc" = 0 ] && [ -n "$out" ] && [[ "$out" != *"|"*"|"* ]] && [ "${out%%|*}" != "${out#*|}" ]'
finish
