#!/bin/bash
# Builds, without any registry, a small Debian image for installing a .deb
# with apt: the files of the host's own installed packages named below and
# everything they depend on (apt, dpkg, a shell, gcc and libc6-dev), and a
# dpkg database that lists exactly those packages, so apt inside the image
# resolves a package's Depends against them offline.
# Usage: debian_image.sh TAG PACKAGE...      (prints the image id on stdout)
# The image carries a label with the digest of the package list, versions
# and this script: an unchanged host gives the existing image back at once.
set -euo pipefail
TAG=$1; shift
command -v docker >/dev/null || { echo "debian_image: docker not found" >&2; exit 1; }

for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        { echo "debian_image: $p is not installed on this host" >&2; exit 1; }
done
# The dependency closure; of alternatives (a | b) the installed ones.
PKGS=$(apt-cache depends --recurse --installed --no-recommends --no-suggests --no-conflicts \
           --no-breaks --no-replaces --no-enhances "$@" 2>/dev/null | grep -v '^[ <]' | sort -u |
       while read -r p; do
           dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" && echo "$p"
       done)
SUM=$( { dpkg-query -W -f='${Package} ${Version}\n' $PKGS; cat "$0"; } | sha256sum | cut -c1-16)
EXISTING=$(docker image inspect -f '{{index .Config.Labels "phx.debian"}} {{.Id}}' "$TAG" 2>/dev/null || true)
if [ "${EXISTING%% *}" = "$SUM" ]; then
    echo "debian_image: $TAG is up to date ($SUM)" >&2
    echo "${EXISTING#* }"
    exit 0
fi

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/phx-debroot.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
RFS=$STAGE/rootfs
mkdir -p "$RFS"
# Merged /usr: /bin, /lib, ... are links into /usr, as on the host.
for d in bin sbin lib lib32 lib64 libx32; do
    [ -L "/$d" ] && ln -s "$(readlink "/$d")" "$RFS/$d" && mkdir -p "$RFS/$(readlink "/$d")"
done
# Every packaged path but documentation, directories without recursion; the
# merged-/usr links themselves are made above (tar would replace them).
for p in $PKGS; do dpkg-query -L "$p"; done | grep '^/' | sort -u |
    grep -Ev '^/usr/share/(doc|man|info|locale|lintian)(/|$)' |
    grep -Ev '^/(\.|bin|sbin|lib|lib32|lib64|libx32)$' | sed 's|^/||' >"$STAGE/files"
tar -C / --no-recursion -cf - -T "$STAGE/files" | tar -C "$RFS" -xf -
# Alternatives (cc) are made by maintainer scripts, not listed by dpkg.
ln -sf gcc "$RFS/usr/bin/cc"

D=$RFS/var/lib/dpkg
mkdir -p "$D/info" "$D/updates" "$D/triggers" "$D/alternatives" \
         "$RFS/var/lib/apt/lists/partial" "$RFS/var/cache/apt/archives/partial" "$RFS/var/log/apt" \
         "$RFS/etc/apt/sources.list.d" "$RFS/root" "$RFS/data"
mkdir -m 1777 -p "$RFS/tmp"
for p in $PKGS; do dpkg-query -s "$p"; echo; done >"$D/status"
: >"$D/available"
for p in $PKGS; do
    for f in /var/lib/dpkg/info/"$p".* /var/lib/dpkg/info/"$p":*.*; do
        [ -e "$f" ] && cp -a "$f" "$D/info/"
    done
done
cat >"$RFS/etc/passwd" <<P
root:x:0:0:root:/root:/bin/sh
_apt:x:42:65534::/nonexistent:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
P
cat >"$RFS/etc/group" <<G
root:x:0:
nogroup:x:65534:
G
printf '127.0.0.1\tlocalhost\n' >"$RFS/etc/hosts"
echo "hosts: files dns" >"$RFS/etc/nsswitch.conf"

tar --sort=name --owner=0 --group=0 --numeric-owner -C "$RFS" -cf "$STAGE/rootfs.tar" .
echo "debian_image: $(echo $PKGS | wc -w) packages, $(du -sh "$STAGE/rootfs.tar" | cut -f1), importing as $TAG" >&2
ID=$(docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'WORKDIR /root' \
    -c "LABEL phx.debian=$SUM" \
    -c 'CMD ["/bin/bash"]' \
    "$STAGE/rootfs.tar" "$TAG")
# The image this one replaces under TAG (unless a container still uses it).
OLD=${EXISTING#* }
[ -n "$EXISTING" ] && [ "$OLD" != "$ID" ] && docker image rm "$OLD" >/dev/null 2>&1
echo "$ID"
