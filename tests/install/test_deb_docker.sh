#!/bin/bash
# The Debian package in a container, the way a cluster image gets Phalanx:
# CPack builds phalanx_*.deb; a Debian image made offline from this host's
# own packages (debian_image.sh: apt, dpkg, gcc, libc6-dev and the runtime
# libraries the package depends on, nothing of this repository) runs, with
# no network:
#   apt install ./phalanx_*.deb
#   phxcc hello.c -o hello         (the packaged example, copied to /tmp)
#   phx run -n 2 ./hello           -> "hello: 2 of 2 ranks said hello"
#   phx run -n 2 phx-ring 100      (a packaged example app)
# Skipped (77) without a Docker engine. Removes its container at exit; the
# image is kept and reused while the host's packages are unchanged.
# Usage: test_deb_docker.sh BUILD_DIR
set -u
BUILD=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
. "$SRC/tests/integration/lib.sh"
command -v docker >/dev/null 2>&1 || skip "no docker command"
timeout 20 docker info >/dev/null 2>&1 || skip "no Docker engine (docker info failed)"
command -v dpkg-deb >/dev/null || skip "no dpkg-deb (not a Debian system)"
IMAGE=${PHX_DEB_IMAGE:-phalanx-debian:local}
NAME=phxdeb-$$
HB_MS=$(hb_ms)
LIMIT=$(( 120 + 10 * HB_MS / 1000 ))   # apt, one compile, two 2-node jobs
trap 'docker rm -f "$NAME" >/dev/null 2>&1; cleanup' EXIT
trap 'exit 130' INT TERM

cpack --config "$BUILD/CPackConfig.cmake" -G DEB -B "$TMP/deb" >"$TMP/cpack.log" 2>&1; rc=$?
DEB=$(cd "$TMP/deb" 2>/dev/null && ls phalanx_*.deb 2>/dev/null | head -1)
check "cpack -G DEB makes phalanx_*.deb (rc $rc)" [ -n "$DEB" ]
[ -n "$DEB" ] || { sed 's/^/#   /' "$TMP/cpack.log" | tail -20; finish; exit; }
rm -rf "$TMP/deb/_CPack_Packages"

# The runtime packages come from the .deb's own Depends, so a missing one
# shows up as a program that cannot load in the container.
DEPS=$(dpkg-deb -f "$TMP/deb/$DEB" Depends | tr ',' '\n' | sed 's/(.*)//; s/|.*//; s/ //g' | grep .)
echo "# image packages: base, toolchain and the Depends: $(echo $DEPS)"
t=$(now_ms)
id=$(timeout 300 bash "$HERE/debian_image.sh" "$IMAGE" apt dpkg bash dash coreutils diffutils grep sed mawk tar gzip \
         findutils libc-bin perl-base gcc libc6-dev $DEPS 2>"$TMP/image.err")
check "Debian image $IMAGE built offline (${id:0:19}, $(( $(now_ms) - t )) ms)" [ -n "$id" ]
[ -n "$id" ] || { sed 's/^/#   /' "$TMP/image.err" | tail -20; finish; exit; }

cat >"$TMP/deb/in.sh" <<'S'
set -e
! command -v phx >/dev/null || { echo "phx is there before the package"; exit 1; }
cd /deb
apt install -y ./phalanx_*.deb >/tmp/apt.log 2>&1 || { tail -20 /tmp/apt.log; exit 1; }
echo "installed: $(dpkg-query -W -f='${Package} ${Version} ${Status}' phalanx)"
cp /usr/share/phalanx/examples/hello/hello.c /tmp/ && cd /tmp
echo "showme: $(phxcc --showme hello.c -o hello)"
phxcc hello.c -o hello
echo "loads: $(ldd ./hello | grep -o 'libphalanx.so.0 => [^ ]*')"
phx run -n 2 ./hello
phx run -n 2 phx-ring 100
S
timeout -k 10 "$LIMIT" docker run --rm --name "$NAME" --network none -v "$TMP/deb:/deb:ro" "$IMAGE" \
    bash /deb/in.sh >"$TMP/out" 2>&1; rc=$?
sed 's/^/#   /' "$TMP/out" | tail -20
check "in the container: apt install ./$DEB, phxcc, phx run (rc $rc)" [ "$rc" = 0 ]
check "apt installed the package" grep -q "^installed: phalanx .* install ok installed" "$TMP/out"
check "phxcc --showme: cc -I/usr/include hello.c -o hello -L/usr/lib -lphalanx ..." \
    grep -q "^showme: cc -I/usr/include hello.c -o hello -L/usr/lib -lphalanx" "$TMP/out"
check "hello loads the packaged /usr/lib/libphalanx.so.0" grep -Eq "libphalanx.so.0 => (/usr)?/lib/libphalanx.so.0" "$TMP/out"
check "hello on 2 nodes: rank 0's line" grep -q "hello: 2 of 2 ranks said hello" "$TMP/out"
check "phx-ring on 2 nodes: OK" grep -q "ring: 2 nodes x 100 laps = 200 hops .* OK" "$TMP/out"
finish
