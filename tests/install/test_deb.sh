#!/bin/bash
# The Debian package, without Docker: CPack builds phalanx_*.deb from this
# build tree, and
#   - dpkg-deb -c lists the libraries, headers, phx, phxcc, an example app,
#     phalanx.pc, the CMake package and the example source under /usr;
#   - dpkg -I names the runtime packages in Depends (libuv1, libjemalloc2,
#     libssl3, libisal2, libmicrohttpd12), and every library a packaged
#     program or library loads comes from libc6 or a package in Depends.
# Usage: test_deb.sh BUILD_DIR
set -u
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
. "$SRC/tests/integration/lib.sh"
command -v dpkg-deb >/dev/null || skip "no dpkg-deb (not a Debian system)"

cpack --config "$BUILD/CPackConfig.cmake" -G DEB -B "$TMP/out" >"$TMP/cpack.log" 2>&1; rc=$?
DEB=$(ls "$TMP"/out/phalanx_*.deb 2>/dev/null | head -1)
check "cpack -G DEB makes phalanx_*.deb (rc $rc)" [ "$rc" = 0 ] && [ -n "$DEB" ]
[ -n "$DEB" ] || { sed 's/^/#   /' "$TMP/cpack.log" | tail -20; finish; exit; }
echo "# $(basename "$DEB"): $(du -h "$DEB" | cut -f1)"

dpkg-deb -c "$DEB" | awk '{ print $6 }' | sed 's|^\./|/|' >"$TMP/list"
for f in /usr/bin/phx /usr/bin/phxcc /usr/bin/phx-ring /usr/lib/libphalanx.so /usr/lib/libphalanx.so.0 \
         /usr/lib/libphalanx.a /usr/include/phalanx/phalanx.h /usr/include/phalanx/base/phx_err.h \
         /usr/lib/pkgconfig/phalanx.pc /usr/lib/cmake/Phalanx/PhalanxConfig.cmake \
         /usr/lib/cmake/Phalanx/PhalanxTargets.cmake /usr/share/phalanx/examples/hello/hello.c; do
    check "dpkg-deb -c lists $f" grep -qx "$f" "$TMP/list"
done
check "no file outside /usr" eval '! grep -v "^/usr" "$TMP/list" | grep -q .'

dpkg-deb -f "$DEB" Depends >"$TMP/depends"
echo "# Depends: $(cat "$TMP/depends")"
check "dpkg -I shows Depends" eval 'dpkg -I "$DEB" | grep -q "^ Depends: "'
for p in libc6 libuv1 libjemalloc2 libssl3 libisal2 libmicrohttpd12; do
    check "Depends names $p" grep -Eq "(^|, )$p( |,|$)" "$TMP/depends"
done
# Each NEEDED library of the packaged ELF files, by the package that owns it here.
X=$TMP/x
dpkg-deb -x "$DEB" "$X"
for f in $(find "$X" -type f -perm -u+x) "$X"/usr/lib/libphalanx.so.0.*; do
    head -c4 "$f" | grep -q ELF && readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
done | grep -v '^libphalanx\.so' | sort -u >"$TMP/needed"
echo "# the packaged files load: $(tr '\n' ' ' <"$TMP/needed")"
missing=""
while read -r lib; do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')
    pkg=$(dpkg -S "$path" 2>/dev/null || dpkg -S "$(readlink -f "$path")" 2>/dev/null)
    pkg=${pkg%%:*}
    grep -Eq "(^|, )$pkg( |,|$)" "$TMP/depends" || missing="$missing $lib(${pkg:-no package})"
done <"$TMP/needed"
check "every library the packaged files load is in Depends${missing:+ (missing:$missing)}" [ -z "$missing" ]
finish
