#!/bin/bash
# Transport robustness: bad frames and wrong secrets close one connection
# with a logged reason and never disturb the node; startup failures name the
# unreachable peer. Nodes are started by hand here so the test controls the
# ports and can act as a peer itself.
# Usage: test_transport.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
P=$(port_base)
export PHX_SECRET=it-secret PHX_JOB_ID=42 PHX_TD=none PHX_LOG=info PHX_STARTUP_TIMEOUT=20000

# 1. Pre-authentication garbage against a node waiting for its peer.
PEERS="127.0.0.1:$P,127.0.0.1:$((P + 1))"
PHX_RANK=0 PHX_SIZE=2 PHX_PEERS=$PEERS "$BIN/ring" 200 >"$TMP/r0.out" 2>"$TMP/r0.err" &
R0=$!; PIDS="$PIDS $R0"
wait_for 10 port_open 127.0.0.1 "$P" || fail "rank 0 listens"
for m in garbage badmagic badversion badtype badflags badcrc oversize truncated preauth-app wrongsecret; do
    check "pre-auth $m closes the connection" "$BIN/phx-inject" 127.0.0.1 "$P" "$m" 1 42
done
check "node still alive after bad input" kill -0 "$R0"
PHX_RANK=1 PHX_SIZE=2 PHX_PEERS=$PEERS "$BIN/ring" 200 >"$TMP/r1.out" 2>"$TMP/r1.err" &
R1=$!; PIDS="$PIDS $R1"
wait "$R0"; rc0=$?; wait "$R1"; rc1=$?
check "job completes after bad input (rc $rc0/$rc1)" [ "$rc0" = 0 -a "$rc1" = 0 ]
check "ring result is right" grep -q "OK" "$TMP/r0.out"
check "bad frame reason logged" grep -q "bad frame" "$TMP/r0.err"
check "wrong secret logged" grep -q "wrong cluster secret" "$TMP/r0.err"

# 2. An authenticated peer that sends a corrupt frame: the connection closes
# with the reason; with fault tolerance off the node ends the job cleanly.
P2=$((P + 2))
PHX_RANK=0 PHX_SIZE=2 PHX_PEERS="127.0.0.1:$P2,127.0.0.1:$((P2 + 1))" "$BIN/ring" 200 \
    >"$TMP/a0.out" 2>"$TMP/a0.err" &
A0=$!; PIDS="$PIDS $A0"
wait_for 10 port_open 127.0.0.1 "$P2" || fail "rank 0 listens (2)"
check "post-auth bad checksum closes the connection" "$BIN/phx-inject" 127.0.0.1 "$P2" auth-badcrc 1 42
wait "$A0"; rc=$?
check "node ends the job with code 70, not a crash (rc $rc)" [ "$rc" = 70 ]
check "checksum reason logged" grep -q "bad frame: .*checksum\|bad frame: .*CRC\|bad frame: .*crc" "$TMP/a0.err"

# 3. A peer that never comes: a clear error naming host:port.
P3=$((P + 4))
PHX_STARTUP_TIMEOUT=1000 PHX_RANK=1 PHX_SIZE=2 PHX_PEERS="127.0.0.1:$P3,127.0.0.1:$((P3 + 1))" \
    "$BIN/ring" 10 >"$TMP/s.out" 2>"$TMP/s.err"
rc=$?
check "startup timeout exits non-zero (rc $rc)" [ "$rc" != 0 ]
check "startup error names host:port" grep -q "rank 0 at 127.0.0.1:$P3" "$TMP/s.err"

# 4. Wrong secret between real nodes: refused and logged, job fails cleanly.
P4=$((P + 6))
PHX_STARTUP_TIMEOUT=3000 PHX_RANK=0 PHX_SIZE=2 PHX_PEERS="127.0.0.1:$P4,127.0.0.1:$((P4 + 1))" \
    "$BIN/ring" 10 >"$TMP/w0.out" 2>"$TMP/w0.err" &
W0=$!; PIDS="$PIDS $W0"
PHX_SECRET=other PHX_STARTUP_TIMEOUT=3000 PHX_RANK=1 PHX_SIZE=2 \
    PHX_PEERS="127.0.0.1:$P4,127.0.0.1:$((P4 + 1))" "$BIN/ring" 10 >"$TMP/w1.out" 2>"$TMP/w1.err"
rc1=$?; wait "$W0"; rc0=$?
check "wrong-secret peers never run the job (rc $rc0/$rc1)" [ "$rc0" != 0 -a "$rc1" != 0 ]
check "refusal logged" grep -q "wrong cluster secret" "$TMP/w0.err" "$TMP/w1.err"
finish
