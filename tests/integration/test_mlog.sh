#!/bin/bash
# Message logging (issue 11). The protocol lives in ft/mlog (unit tests
# test_mlog_detq, test_mlog_scml); the runtime glue is not written yet, so
# recovery=mlog-causal and mlog-pessimistic must be refused at startup with
# a message saying so (exit 2) and never run a job unprotected.
# Usage: test_mlog.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
export PHX_WORKERS=1
for mode in mlog-causal mlog-pessimistic; do
    timeout -k 5 60 "$BIN/phx" run -n 2 "$BIN/jacobi" --phx-ft=1 --phx-recovery=$mode -N 64 -i 10 -c 5 \
        >"$TMP/out" 2>"$TMP/err"
    rc=$?
    check "recovery=$mode refused: exit 2, says it is not implemented, prints no result" eval \
        '[ $rc = 2 ] && grep -q "recovery=$mode is not implemented yet" "$TMP/err" && ! grep -q checksum "$TMP/out"'
done
# The names are known (listed among the valid values), a typo is not.
timeout -k 5 60 "$BIN/phx" run -n 2 "$BIN/jacobi" --phx-ft=1 --phx-recovery=mlog-bogus -N 64 -i 10 >"$TMP/out" 2>"$TMP/err"
rc=$?
check "an unknown mode lists the mlog ones" eval \
    '[ $rc = 2 ] && grep -q "unknown recovery mode .mlog-bogus. (none|cr|mlog-causal|mlog-pessimistic)" "$TMP/err"'
finish
