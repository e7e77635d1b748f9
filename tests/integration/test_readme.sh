#!/bin/bash
# The documentation runs as written: every ```sh block of README.md and of
# docs/*.md, each in its own shell (sh -e: any failing command fails the
# block), and the pages point only at files that exist.
#
# Convention for fenced blocks (the word after ```sh is the block's tag):
#   ```sh            run from a directory laid out like the repository root
#                    after ./build.sh (build/ and tools/ linked; a fresh
#                    directory per page, blocks in page order).
#   ```sh install    needs Phalanx installed in $HOME/phalanx, as README.md
#                    tells a user to do: this test installs the build there
#                    (cmake --install) with HOME set to a temporary directory,
#                    and runs the block with that HOME and $HOME/phalanx/bin
#                    first on PATH (PKG_CONFIG_PATH, CMAKE_PREFIX_PATH and
#                    LD_LIBRARY_PATH unset), from a directory of its
#                    own holding the page's file blocks (below). Skipped, and
#                    said so, when the build installs no phxcc.
#   ```sh docker, ```sh ssh, ```sh slurm
#                    need a Docker engine, ssh to other hosts, or a Slurm
#                    allocation: run only where PHX_README_ENV lists the tag
#                    (e.g. PHX_README_ENV="docker slurm" in a prepared
#                    environment); otherwise skipped, and said so.
#   ```sh suite      the build and the test suite themselves (./build.sh):
#                    never run here. An untagged block calling ./build.sh
#                    counts as suite, one calling tools/docker/ as docker.
#   ```console, ```text, ```c, ... are not run. A block of any language
#   whose previous line is `<!-- test_readme: file NAME -->` is written to
#   NAME in the directory the page's install blocks run from.
# Any other tag fails the test (a typo must not skip a block silently).
#
# Also checked: relative links and backquoted repository paths in these
# pages name files that exist; no page cites an issue number or a file
# that exists only outside the repository.
# Usage: test_readme.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$BIN/.." && pwd)
HB_MS=${PHX_HB_TIMEOUT:-1000}
LIMIT=$(( 60 + 20 * HB_MS / 1000 ))   # per block; a hung block is cut off (rc 124)
ENVS=" ${PHX_README_ENV:-} "

PAGES="README.md"
for p in "$SRC"/docs/*.md; do [ -e "$p" ] && PAGES="$PAGES docs/${p##*/}"; done

# expect BLOCK-FILE: the results a block must print, by the commands it has.
expect() {
    ! grep -q "WRONG" "$TMP/out" || return 1
    grep -q "fib 20" "$1" && { grep -q "fib(20) = 6765 on 8 nodes .*OK" "$TMP/out" || return 1; }
    grep -q "ring 1000" "$1" && { grep -q "ring: 4 nodes x 1000 laps = 4000 hops .*OK" "$TMP/out" || return 1; }
    grep -q "fib 18" "$1" && { grep -q "fib(18) = 2584 on 4 nodes .*OK" "$TMP/out" || return 1; }
    grep -q -- "--phx-help" "$1" && { grep -q -- "--phx-hb-timeout" "$TMP/out" || return 1; }
    grep -q "busy " "$1" && grep -q "phx-chaos" "$1" &&
        { grep -q "busy: done after .* 1 failed" "$TMP/out" || return 1; }
    grep -q "build/bin/uts" "$1" &&
        { [ "$(grep -c "Tree size = 16000, tree depth = 6, num leaves = 12839" "$TMP/out")" = \
            "$(grep -c "build/bin/uts" "$1")" ] || return 1; }
    # a kill the job waits for (--gate) was delivered, not timed out
    grep -q "phx-chaos.*--gate\|--gate.*rank" "$1" && { grep -q "planned signal(s) delivered" "$TMP/out" || return 1; }
    # jacobi under a job and --seq: every checksum printed is the same one
    if grep -q "jacobi --seq" "$1" && grep -q "phx run" "$1"; then
        [ "$(grep -o 'checksum=[0-9a-f]*' "$TMP/out" | wc -l)" -ge 2 ] &&
            [ "$(grep -o 'checksum=[0-9a-f]*' "$TMP/out" | sort -u | wc -l)" = 1 ] || return 1
    fi
    # hello, built one way or another and run on 2 nodes: both ranks answered
    grep -q "run -n 2 .*hello" "$1" && { grep -q "hello: 2 of 2 ranks said hello" "$TMP/out" || return 1; }
    return 0
}

# Installs the build once, at the first install block; 0 when installed.
INSTALLED=""
UHOME=$TMP/home
PREFIX=$UHOME/phalanx
install_once() {
    [ -n "$INSTALLED" ] && { [ "$INSTALLED" = yes ]; return; }
    INSTALLED=no
    mkdir -p "$UHOME" || return 1
    cmake --install "$BUILD" --prefix "$PREFIX" >"$TMP/install.log" 2>&1 ||
        { fail "cmake --install build --prefix \$HOME/phalanx"; sed 's/^/#   /' "$TMP/install.log" | tail -20; return 1; }
    [ -x "$PREFIX/bin/phxcc" ] || return 1
    INSTALLED=yes
}

# run_block PAGE N TAG FILE DIR [ENV...]
run_block() {
    local page=$1 n=$2 tag=$3 b=$4 dir=$5; shift 5
    local first what
    first=$(grep -v '^[[:space:]]*#' "$b" | head -1 | cut -c1-60)
    what="$page block $n${tag:+ ($tag)}"
    (cd "$dir" && env "$@" timeout -k 5 "$LIMIT" sh -e "$b") >"$TMP/out" 2>&1; rc=$?
    check "$what runs as written: '$first' (rc $rc)" [ "$rc" = 0 ]
    check "$what prints the right results" expect "$b"
    [ "$rc" = 0 ] && expect "$b" || sed 's/^/#   /' "$TMP/out" | tail -30
}

np=0
for page in $PAGES; do
    np=$((np + 1))
    D=$TMP/page.$np
    W=$D/root; OWN=$D/own
    mkdir -p "$W" "$OWN" && ln -s "$BUILD" "$W/build" && ln -s "$SRC/tools" "$W/tools" || exit 1
    # Blocks to $D/block.NN.sh with their tag in $D/block.NN.tag; file blocks to $OWN.
    # Fences may be indented (inside a list item); the indent is stripped.
    awk -v d="$D" -v own="$OWN" '
        /^<!-- test_readme: file [^ ]+ -->$/ { file = $4; next }
        /^ *```/ && !inb {
            inb = 1; ind = index($0, "`") - 1; info = substr($0, ind + 4); split(info, w, " ")
            if (file != "") { out = own "/" file; kind = "file" }
            else if (w[1] == "sh") { n++; out = sprintf("%s/block.%02d.sh", d, n); kind = "sh"
                                     tf = sprintf("%s/block.%02d.tag", d, n); printf "%s", w[2] > tf; close(tf) }
            else kind = "other"
            file = ""; next
        }
        /^ *``` *$/ && inb { inb = 0; if (kind != "other") close(out); next }
        inb && kind != "other" { line = $0; if (substr(line, 1, ind) ~ /^ *$/) line = substr(line, ind + 1); print line > out }
        { file = "" }' "$SRC/$page"
    for b in "$D"/block.*.sh; do
        [ -e "$b" ] || continue
        n=$(basename "$b" .sh); n=${n#block.}
        tag=$(cat "${b%.sh}.tag")
        first=$(grep -v '^[[:space:]]*#' "$b" | head -1 | cut -c1-60)
        if [ -z "$tag" ] && grep -q '\./build\.sh' "$b"; then tag=suite; fi
        if [ -z "$tag" ] && grep -q 'tools/docker/' "$b"; then tag=docker; fi
        case "$tag" in
        "") run_block "$page" "$n" "" "$b" "$W" ;;
        suite) echo "# skip: $page block $n '$first' (the build and the test suite themselves)" ;;
        install)
            if install_once; then
                run_block "$page" "$n" install "$b" "$OWN" -u PKG_CONFIG_PATH -u CMAKE_PREFIX_PATH \
                    -u LD_LIBRARY_PATH HOME="$UHOME" PATH="$PREFIX/bin:$PATH"
            else
                echo "# skip: $page block $n '$first' (needs an installed prefix: this build installs no phxcc)"
            fi ;;
        docker|ssh|slurm)
            case "$ENVS" in
            *" $tag "*) run_block "$page" "$n" "$tag" "$b" "$W" ;;
            *) echo "# skip: $page block $n '$first' (needs $tag: PHX_README_ENV=$tag runs it)" ;;
            esac ;;
        *) fail "$page block $n: unknown tag '$tag' (sh, sh install, sh docker, sh ssh, sh slurm, sh suite)" ;;
        esac
    done
done

# ---- references ------------------------------------------------------------
# refs PAGE: "L target" for each relative link (relative to the page),
# "P path" for each backquoted repository path (relative to the root).
refs() {
    { grep -o '](\([^)#]*\)' "$SRC/$1" | sed 's/^](//' | grep -v '^[a-z]*:' | grep -v '^$' | sed 's/^/L /'
      grep -o '`\(apps\|base\|core\|docs\|examples\|ext\|ft\|net\|tests\|tools\)/[^` ]*`' "$SRC/$1" |
          tr -d '`' | sed 's/^/P /'
    } | sort -u
}
for page in $PAGES; do
    base=$(dirname "$page")
    missing=""
    while read -r kind r; do
        case "$r" in /*|*\**|*%*|*\{*) continue ;; esac
        if [ "$kind" = L ]; then t=$(realpath -m --relative-to="$SRC" "$SRC/$base/$r"); else t=${r%/}; fi
        [ -e "$SRC/$t" ] && continue
        missing="$missing $r"
    done <<EOF2
$(refs "$page")
EOF2
    check "$page: every linked or named repository file exists${missing:+ (missing:$missing)}" [ -z "$missing" ]
    check "$page cites no issue number and no file from outside the repository" \
        eval "! grep -n -i -E 'issue [0-9]|seeds/|seed 00[0-9]|[0-9]{3}_\\*|seed-00|shared/research' '$SRC/$page'"
done
finish
