#!/bin/bash
# Zero-copy large frames (net/README.md, "Large frames"): payloads from
# PHX_DEBUG_ZC_MIN bytes on are written from the sender's buffer and
# received straight into the receiver's. jacobi's ghosts (1 KiB here) and
# cr's checkpoint chunks take that path; links are cut in the middle
# (PHX_DEBUG_CUT_LINK), so referenced frames are resent and claims in
# progress end with the connection. The checksum must equal --seq's.
# Usage: test_zerocopy.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
HB=${PHX_HB_TIMEOUT:-1000}
export PHX_SECRET=it-secret PHX_HB_TIMEOUT=$HB PHX_LOG=info PHX_WORKERS=2
# Ghosts of 2 KiB go zero-copy and, read 1500 bytes at a time, straddle
# reads: each is received in place.
export PHX_DEBUG_ZC_MIN=1000 PHX_DEBUG_READ_MAX=1500
unset PHX_HB_PERIOD
JOB_TIMEOUT=$((60 + 20 * HB / 1000))
ARGS="-N 1024 -i 60"
ref=$("$BIN/jacobi" --seq $ARGS -P 4 | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
[ -n "$ref" ] || { echo "FAIL - jacobi --seq printed no checksum"; exit 1; }

# job NAME CUT ARGS...: output in $TMP/NAME.{out,err}
job() {
    name=$1; cut=$2; shift 2
    PHX_DEBUG_CUT_LINK=$cut timeout -k 5 "$JOB_TIMEOUT" "$BIN/phx" run -n 4 "$BIN/jacobi" "$@" $ARGS \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
    rc=$?
    check "$name: exit 0 (rc $rc)" [ "$rc" = 0 ]
    check "$name: checksum equals --seq ($ref)" grep -q "checksum=$ref" "$TMP/$name.out"
    check "$name: frames were sent zero-copy and received in place" \
        grep -Eq "large frames: [1-9][0-9]* sent zero-copy, [1-9][0-9]* received in place" "$TMP/$name.err"
}

job plain "" --phx-td=none
job cut 1:0:50:3 --phx-td=none
check "cut: the links were cut and restored" grep -q "link to rank 0 restored" "$TMP/cut.err"
# cr: 2 MiB of state per node, a checkpoint every 10 iterations, buddy
# copies in 1 MiB chunks (all but the first of a copy claimed in place).
job cr 2:1:100:3 --phx-ft=1 --phx-recovery=cr -c 10
check "cr: checkpoints committed" grep -q "epoch 4 committed" "$TMP/cr.err"
finish
