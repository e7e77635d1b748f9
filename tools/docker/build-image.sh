#!/bin/bash
# Build the offline Phalanx image (default tag phalanx:local) without any
# registry: assemble a minimal root filesystem from the built binaries and the
# shared libraries ldd reports for them (the dynamic loader included, paths
# preserved), then `docker import` it.
# Usage: tools/docker/build-image.sh [BUILD_DIR]      (default: <repo>/build)
# Env:   PHX_IMAGE  image tag (default phalanx:local)
# Idempotent: a rebuild of the same files gives the same content; the image id
# is printed on stdout (everything else goes to stderr).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=${1:-$ROOT/build}
IMAGE=${PHX_IMAGE:-phalanx:local}
APPS="ring fib busy agree tdk pingpong jacobi uts"

command -v docker >/dev/null || { echo "build-image: docker not found" >&2; exit 1; }
BIN=$BUILD/bin
for a in $APPS; do
    [ -x "$BIN/$a" ] || { echo "build-image: $BIN/$a missing (run ./build.sh build)" >&2; exit 1; }
done

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/phx-rootfs.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
RFS=$STAGE/rootfs
mkdir -p "$RFS/bin" "$RFS/etc" "$RFS/data"
mkdir -m 1777 "$RFS/tmp"

# copy_path SRC: copy SRC into the rootfs at the same path; a symlink is
# copied as a symlink and its target followed as well.
copy_path() {
    local src=$1 dst=$RFS$1
    [ -e "$dst" ] || [ -L "$dst" ] && return 0
    mkdir -p "$(dirname "$dst")"
    if [ -L "$src" ]; then
        cp -P "$src" "$dst"
        local t; t=$(readlink "$src")
        case $t in /*) ;; *) t=$(dirname "$src")/$t ;; esac
        copy_path "$t"
    else
        cp "$src" "$dst"
    fi
}

for a in $APPS; do
    cp "$BIN/$a" "$RFS/bin/$a"
    # ldd lines: "lib => /path (addr)", "/lib64/ld-linux... (addr)", "linux-vdso (addr)"
    while read -r lib; do
        copy_path "$lib"
    done < <(ldd "$BIN/$a" | awk '/=>/ { if ($3 ~ /^\//) print $3; next } $1 ~ /^\// { print $1 }')
done
cat > "$RFS/etc/passwd" <<P
root:x:0:0:root:/:/bin/false
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
P
cat > "$RFS/etc/group" <<G
root:x:0:
nogroup:x:65534:
G
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n' > "$RFS/etc/hosts"
echo "hosts: files dns" > "$RFS/etc/nsswitch.conf"

# Skip the import when the image already holds this exact rootfs (label
# phx.rootfs = digest of every file and symlink). The tarball itself is
# deterministic too: sorted names, fixed owner and mtime.
SUM=$( (cd "$RFS" && find . -type f -print0 | sort -z | xargs -0 sha256sum &&
         find . -type l -printf '%p -> %l\n' | sort) | sha256sum | cut -c1-16)
EXISTING=$(docker image inspect -f '{{index .Config.Labels "phx.rootfs"}} {{.Id}}' "$IMAGE" 2>/dev/null || true)
if [ "${EXISTING%% *}" = "$SUM" ]; then
    echo "build-image: $IMAGE is up to date (rootfs $SUM)" >&2
    echo "${EXISTING#* }"
    exit 0
fi
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='@0' \
    -C "$RFS" -cf "$STAGE/rootfs.tar" .
echo "build-image: rootfs $(du -sh "$RFS" | cut -f1), importing as $IMAGE" >&2
ID=$(docker import \
    -c 'WORKDIR /tmp' \
    -c 'ENV PATH=/bin' \
    -c "LABEL phx.rootfs=$SUM" \
    -c 'CMD ["/bin/ring"]' \
    "$STAGE/rootfs.tar" "$IMAGE")
echo "$ID"
