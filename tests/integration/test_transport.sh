#!/bin/bash
# Transport robustness: bad frames and wrong secrets close one connection
# with a logged reason and never disturb the node; an authenticated peer that
# keeps sending garbage is given up after a bounded number of connections;
# startup failures name the unreachable peer. Exit codes are checked exactly
# (1: startup failed, 70: peer lost with fault tolerance off), so a crash
# cannot pass. Nodes are started by hand here so the test controls the
# ports and can act as a peer itself.
# Usage: test_transport.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
P=$(port_base)
export PHX_SECRET=it-secret PHX_JOB_ID=42 PHX_TD=none PHX_LOG=info PHX_STARTUP_TIMEOUT=20000

# start0 NAME PORT LAPS [VAR=VALUE...]: rank 0 of a 2-node ring listening on
# PORT (output in $TMP/NAME.{out,err}, pid in $N0); waits until it listens.
start0() {
    name=$1; port=$2; laps=$3; shift 3
    env "$@" PHX_RANK=0 PHX_SIZE=2 PHX_PEERS="127.0.0.1:$port,127.0.0.1:$((port + 1))" \
        "$BIN/ring" "$laps" >"$TMP/$name.out" 2>"$TMP/$name.err" &
    N0=$!; PIDS="$PIDS $N0"
    wait_for 10 port_open 127.0.0.1 "$port" || fail "$name: rank 0 listens"
}

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

# post_auth NAME PORT MODE: rank 0 of a ring listens on PORT, phx-inject
# authenticates as rank 1 and misbehaves with MODE; the node must close that
# connection, and, the link not being restored within delta (hb-timeout),
# end the job with 70 (fault tolerance off) instead of crashing or hanging.
# Leaves the node's exit code in $rc.
post_auth() {
    start0 "$1" "$2" 200
    check "post-auth $3 closes the connection" "$BIN/phx-inject" 127.0.0.1 "$2" "$3" 1 42
    wait "$N0"; rc=$?
    check "post-auth $3: node ends the job with code 70, not a crash or hang (rc $rc)" [ "$rc" = 70 ]
}

# 2. An authenticated peer that sends a corrupt frame.
post_auth a0 $((P + 2)) auth-badcrc
check "checksum reason logged" grep -q "bad frame: .*checksum\|bad frame: .*CRC\|bad frame: .*crc" "$TMP/a0.err"
check "link loss named as the reason" grep -q "lost rank 1 .*link not restored in time; fault tolerance is off" "$TMP/a0.err"

# 2b. An authenticated peer whose well-framed message its protocol rejects
# (addressed to a task that does not live here): only that connection
# closes, as a violation; the peer is not silently kept "alive" behind a
# dead link.
post_auth b0 $((P + 12)) auth-badpayload
check "malformed message reason logged" grep -q "malformed application frame" "$TMP/b0.err"

# 2c. Large frames are received in place (zero-copy), over several reads: a
# valid one passes its checksum and reaches the protocol (which rejects its
# address), a corrupt one closes the connection with the reason logged.
post_auth z0 $((P + 14)) auth-big
check "large frame received in pieces is checked and delivered" grep -q "malformed application frame" "$TMP/z0.err"
post_auth z1 $((P + 16)) auth-bigbadcrc
check "bad checksum on a large frame received in place logged" \
    grep -q "bad frame: crc mismatch.*APP len 1048576, received in place" "$TMP/z1.err"

# 3. A peer that never comes: a clear error naming host:port.
P3=$((P + 4))
PHX_STARTUP_TIMEOUT=1000 PHX_RANK=1 PHX_SIZE=2 PHX_PEERS="127.0.0.1:$P3,127.0.0.1:$((P3 + 1))" \
    "$BIN/ring" 10 >"$TMP/s.out" 2>"$TMP/s.err"
rc=$?
check "startup timeout exits 1 (rc $rc)" [ "$rc" = 1 ]
check "startup error names host:port" \
    grep -q "startup failed: could not connect to rank 0 at 127.0.0.1:$P3 within 1000 ms" "$TMP/s.err"

# 4. Wrong secret between real nodes: refused and logged, job fails cleanly.
P4=$((P + 6))
PHX_STARTUP_TIMEOUT=3000 PHX_RANK=0 PHX_SIZE=2 PHX_PEERS="127.0.0.1:$P4,127.0.0.1:$((P4 + 1))" \
    "$BIN/ring" 10 >"$TMP/w0.out" 2>"$TMP/w0.err" &
W0=$!; PIDS="$PIDS $W0"
PHX_SECRET=other PHX_STARTUP_TIMEOUT=3000 PHX_RANK=1 PHX_SIZE=2 \
    PHX_PEERS="127.0.0.1:$P4,127.0.0.1:$((P4 + 1))" "$BIN/ring" 10 >"$TMP/w1.out" 2>"$TMP/w1.err"
rc1=$?; wait "$W0"; rc0=$?
check "wrong-secret peers never run the job: both exit 1 (rc $rc0/$rc1)" [ "$rc0" = 1 -a "$rc1" = 1 ]
# Both sides check the other's MAC; whichever fails first closes, and the
# other may then see a reset instead of the bad MAC: either logs the refusal.
check "refusal logged" grep -q "wrong cluster secret" "$TMP/w0.err" "$TMP/w1.err"
# The dialer gives up after 5 failed handshakes, or at the startup timeout
# when the resets came first; either way naming the peer.
check "the dialer names the peer" \
    grep -Eq "startup failed: (could not connect to )?rank 0 at 127.0.0.1:$P4(:| within)" "$TMP/w1.err"
check "the acceptor times out naming the peer" \
    grep -q "startup failed: no connection from rank 1 at 127.0.0.1:$((P4 + 1)) within 3000 ms" "$TMP/w0.err"
check "no job ran" sh -c "! grep -q ring '$TMP/w0.out' '$TMP/w1.out'"

# 5. An authenticated peer that keeps reconnecting and sending garbage: each
# connection is closed and counted; the fifth gets the rank refused and, with
# fault tolerance off, the job ends with 70 at once (delta is 60 s here, so
# only the bound can end it in time).
P5=$((P + 8))
start0 g0 "$P5" 10 PHX_HB_TIMEOUT=60000; G0=$N0
for i in 1 2 3 4 5; do
    check "garbage connection $i closed" "$BIN/phx-inject" 127.0.0.1 "$P5" auth-garbage 1 42
done
wait_for 20 sh -c "! kill -0 $G0 2>/dev/null" || fail "node ends after the fifth bad connection"
wait "$G0"; rc=$?
check "node ends the job with code 70 (rc $rc)" [ "$rc" = 70 ]
check "bad connections counted and the rank given up" \
    grep -q "rank 1 at 127.0.0.1:$((P5 + 1)): 5 bad connections (last: bad frame: .*); no longer connecting to it" "$TMP/g0.err"
# 6. Incarnations: a frame of another incarnation than the one the peer's
# HELLO announced is dropped before anything looks at it (no link sequence
# consumed, not delivered); the next, unsequenced data frame closes the
# connection; not restored within delta, the job ends with 70.
P6=$((P + 10))
start0 i0 "$P6" 10 PHX_LOG=debug; I0=$N0
check "old-incarnation frame, then an unsequenced one: closed" "$BIN/phx-inject" 127.0.0.1 "$P6" auth-oldinc 1 42
wait "$I0"; rc=$?
check "node ends the job with code 70 (rc $rc)" [ "$rc" = 70 ]
check "old-incarnation frame dropped" grep -q "dropped frame from rank 1 incarnation 99 (current 0)" "$TMP/i0.err"
check "then closed for the missing sequence number, nothing delivered" \
    sh -c "grep -q 'data frame without a link sequence' '$TMP/i0.err' && ! grep -q 'malformed application frame' '$TMP/i0.err'"
# Helpers for 7-9. hold_port PORT: a foreign process listens on PORT (its
# pid in $HOLDER). silent PORT FILE: a foreign client connects to PORT and
# never sends a byte; when the node closes it, FILE gets "closed". Both run
# until killed at cleanup.
hold_port() {
    python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8); time.sleep(3600)' "$1" &
    HOLDER=$!; PIDS="$PIDS $HOLDER"
    wait_for 10 port_open 127.0.0.1 "$1" || fail "port $1 held"
}
silent() {
    python3 -c 'import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
open(sys.argv[2] + ".open", "w").close()
while True:
    try:
        if not s.recv(65536): break
    except OSError: break
open(sys.argv[2], "w").write("closed\n")' "$1" "$2" &
    PIDS="$PIDS $!"
    wait_for 10 test -e "$2.open" || fail "silent client connected to $1"
}
HB=$(hb_ms)
# reap PID: its exit code in $rc, or 124 if it is still running after the
# startup timeout plus 10 s (the jobs here take well under a second): killed.
reap() {
    gone "$1" $((PHX_STARTUP_TIMEOUT + 10000)) || { kill -9 "$1" 2>/dev/null; wait "$1"; rc=124; return; }
    wait "$1"; rc=$?
}

# 7. Startup fails before the recovery mode is set up (the listen port is
# taken): the node exits 1 naming the port, whatever the mode; a crash in
# the shutdown path (139, 134) or a hang (124) fails. The bound: a node
# told to stop ends within delta + 2 s (PHX_STOP_SLACK_MS, core/node.h).
P7=$((P + 20))
hold_port "$P7"
for rec in none cr mlog-causal; do
    timeout -k 2 $(( 2 * (HB + 2000) / 1000 + 3 )) env PHX_FT=1 PHX_RECOVERY=$rec PHX_RANK=0 PHX_SIZE=2 \
        PHX_PEERS="127.0.0.1:$P7,127.0.0.1:$((P7 + 1))" "$BIN/ring" 10 >"$TMP/busy.$rec.out" 2>"$TMP/busy.$rec.err"
    rc=$?
    check "port taken, recovery=$rec: startup fails with 1, no crash or hang (rc $rc)" [ "$rc" = 1 ]
    check "port taken, recovery=$rec: the error names the port" \
        grep -q "cannot listen on 127.0.0.1:$P7: address already in use" "$TMP/busy.$rec.err"
done
kill "$HOLDER" 2>/dev/null

# 8. A silent foreign client: the node closes it after its handshake
# deadline (delta) and keeps waiting for its peer, which then runs the job.
P8=$((P + 22))
start0 h0 "$P8" 20; H0=$N0
silent "$P8" "$TMP/h0.silent"
wait_for $(( 10 * HB / 1000 + 5 )) test -e "$TMP/h0.silent"
check "silent connection closed after its handshake deadline" test -e "$TMP/h0.silent"
check "the reason is logged" grep -q "closed unidentified connection: no handshake within $HB ms" "$TMP/h0.err"
check "node still waits for its peer" kill -0 "$H0"
PHX_RANK=1 PHX_SIZE=2 PHX_PEERS="127.0.0.1:$P8,127.0.0.1:$((P8 + 1))" "$BIN/ring" 20 >"$TMP/h1.out" 2>"$TMP/h1.err" &
H1=$!; PIDS="$PIDS $H1"
reap "$H0"; rc0=$rc; reap "$H1"; rc1=$rc
check "job runs after the silent client (rc $rc0/$rc1)" [ "$rc0" = 0 -a "$rc1" = 0 ]
check "ring result after the silent client" grep -q "2 nodes x 20 laps = 40 hops.*OK" "$TMP/h0.out"

# 9. A silent client connected to both nodes during a job, its handshake
# deadline (delta = 60 s) far beyond the job: the job ends with the right
# answer and both nodes exit, closing it (reap's bound, 30 s, is below delta).
P9=$((P + 24)); G9=$(gate_new silent)
for r in 0 1; do
    env -u PHX_TD PHX_HB_TIMEOUT=60000 PHX_EVENTLOG="$TMP/s9.%r.jsonl" PHX_RANK=$r PHX_SIZE=2 \
        PHX_PEERS="127.0.0.1:$P9,127.0.0.1:$((P9 + 1))" "$BIN/tdk" --hold "$G9" project 1e-9 \
        >"$TMP/s9.$r.out" 2>"$TMP/s9.$r.err" &
    eval S9_$r=\$!; PIDS="$PIDS $!"
done
wait_event "$TMP/s9.*.jsonl" '"tdk_hold"' 20000 >/dev/null || fail "job holds its work"
silent "$P9" "$TMP/s9.0.silent"
silent "$((P9 + 1))" "$TMP/s9.1.silent"
gate_open "$G9"
reap "$S9_0"; rc0=$rc; reap "$S9_1"; rc1=$rc
check "both nodes exit 0 with a silent client connected (rc $rc0/$rc1)" [ "$rc0" = 0 -a "$rc1" = 0 ]
check "job with a silent client gives the fault-free answer" \
    grep -q "tdk project: nodes=2 thresh=1e-09 map=[a-z]* tasks=5035 leaves=2518 depth=14 integral=242582597.7048957 .* OK" "$TMP/s9.0.out"
# The nodes have exited, so the kernel closed both connections; the clients
# write their file once they are scheduled to read the end.
wait_for 10 test -e "$TMP/s9.0.silent" -a -e "$TMP/s9.1.silent"
check "the silent clients were closed" test -e "$TMP/s9.0.silent" -a -e "$TMP/s9.1.silent"

# 10. Concurrent launchers: each keeps its probe sockets listening and hands
# every local node its own (PHX_LISTEN_FD), so two launchers never give
# their nodes the same port. Results are compared, not exit codes.
unset PHX_SECRET PHX_JOB_ID
K=12
for i in $(seq 1 $K); do
    "$BIN/phx" run -n 3 --quiet "$BIN/ring" 30 >"$TMP/c$i.out" 2>"$TMP/c$i.err" &
    PIDS="$PIDS $!"; eval C_$i=\$!
done
good=0
for i in $(seq 1 $K); do
    eval reap \$C_$i
    grep -q "3 nodes x 30 laps = 90 hops.*OK" "$TMP/c$i.out" && good=$((good + 1))
done
check "$K concurrent launches all give the result ($good of $K)" [ "$good" = "$K" ]
# Deterministic half: a local node was given its listening socket.
GATE=$(gate_new lfd)
"$BIN/phx" run -n 2 --quiet --pidfile "$TMP/lfd.pids" "$BIN/busy" --hold-until "$GATE" 0 >"$TMP/lfd.out" 2>&1 &
L=$!; PIDS="$PIDS $L"
wait_for 20 test -s "$TMP/lfd.pids" || fail "pidfile written"
lpid=$(awk 'NR == 1 { print $2 }' "$TMP/lfd.pids")
wait_for 20 sh -c "readlink /proc/$lpid/exe | grep -q '/busy\$'" || fail "node runs busy"
lfd=$(tr '\0' '\n' <"/proc/$lpid/environ" 2>/dev/null | sed -n 's/^PHX_LISTEN_FD=//p')
check "a local node gets PHX_LISTEN_FD ($lfd)" [ -n "$lfd" ]
check "and it is a socket it holds" sh -c "readlink /proc/$lpid/fd/${lfd:-x} | grep -q '^socket:'"
gate_open "$GATE"
reap "$L"
check "held job ends (rc $rc)" [ "$rc" = 0 ]
finish
