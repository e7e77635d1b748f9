#!/bin/bash
# ssh across hosts: 4 network namespaces on a private bridge stand in for 4
# machines, each running Debian's sshd with a key made for this test only.
# `phx run -f hosts` starts jobs over ssh on their addresses; then one host
# is lost (every process of its namespace killed, or its link taken down)
# while the job holds its work open on a gate, so the loss lands inside
# the job by construction. Checks: results, the secret on no command line
# (ps), exit 0 where a recovery mode covers the loss (busy registers
# phx_on_failure), 76 where none does (ring's token is lost).
#
# Needs root, `ip netns`, veth and bridge links, sshd: skips (77) otherwise.
# Only addresses in 10.99.X.0/24 on the bridge made here are ever used.
# Usage: test_ssh_netns.sh BINDIR
BIN=$(cd "$1" && pwd)
PHX="$BIN/phx"
. "$(dirname "$0")/../integration/lib.sh"

[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "no ip command (Debian: iproute2)"
[ -x /usr/sbin/sshd ] && command -v ssh >/dev/null && command -v ssh-keygen >/dev/null ||
    skip "no sshd/ssh (Debian: openssh-server, openssh-client)"

NH=4
TAG=p$$                            # short: interface names are at most 15 bytes
SW=${TAG}sw                        # the switch: a namespace holding the bridge
NS=""
SSHD=""
net_cleanup() {
    for p in $SSHD; do kill -9 "$p" 2>/dev/null; done
    for ns in $NS; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -n "$pids" ] && kill -9 $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null   # takes its veth ends, and their peers, along
    done
    cleanup
}
trap net_cleanup EXIT
trap 'exit 1' INT TERM
# Leftovers of a copy killed before its trap ran (ctest's timeout kills).
for ns in $(ip netns list 2>/dev/null | grep -Eo '^p[0-9]+(h[0-9]+|sw)'); do
    p=${ns#p}; p=${p%%[hs]*}
    kill -0 "$p" 2>/dev/null && continue
    pids=$(ip netns pids "$ns" 2>/dev/null); [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
done

ip netns add "$SW" 2>/dev/null || skip "cannot create a network namespace (no CAP_SYS_ADMIN?)"
NS=$SW
# A /24 no route uses yet, so a concurrent copy of this test gets another.
X=""
for i in $(seq 0 250); do
    c=$(( ($$ + i) % 250 + 1 ))
    [ -z "$(ip -4 route show "10.99.$c.0/24" 2>/dev/null)" ] && { X=$c; break; }
done
[ -n "$X" ] || skip "no free 10.99.X.0/24 subnet"
# The bridge lives in its own namespace, whose empty firewall forwards
# everything: the host's iptables (e.g. Docker's FORWARD policy DROP) is
# never in the path, and never changed. This machine (the launcher) joins
# the switch through one veth pair, at 10.99.X.1.
ip -n "$SW" link add br0 type bridge && ip -n "$SW" link set br0 up || skip "cannot create a bridge"
ip link add "${TAG}r" type veth peer name up0 netns "$SW" &&
ip -n "$SW" link set up0 master br0 && ip -n "$SW" link set up0 up &&
ip addr add "10.99.$X.1/24" dev "${TAG}r" && ip link set "${TAG}r" up || skip "cannot wire the launcher to the switch"
mkdir -p /run/sshd && chmod 755 /run/sshd     # sshd's privilege separation directory
ssh-keygen -q -t ed25519 -N "" -f "$TMP/key" || skip "ssh-keygen failed"
ssh-keygen -q -t ed25519 -N "" -f "$TMP/hostkey" || skip "ssh-keygen failed"
cp "$TMP/key.pub" "$TMP/authorized_keys"
chmod 600 "$TMP/authorized_keys"
# start_sshd H: Debian's sshd in host H's namespace, test key only.
start_sshd() {
    ip netns exec "${TAG}h$1" /usr/sbin/sshd -D -e -f /dev/null -h "$TMP/hostkey" \
        -o "ListenAddress=10.99.$X.$(($1 + 1))" -o "AuthorizedKeysFile=$TMP/authorized_keys" \
        -o StrictModes=no -o UsePAM=no -o PermitRootLogin=prohibit-password -o PidFile=none \
        -o MaxStartups=100 -o MaxSessions=100 2>>"$TMP/sshd.$1.log" &
    SSHD="$SSHD $!"
    disown $!   # killed on purpose: no job notices
}
: >"$TMP/hosts"
for h in $(seq 1 $NH); do
    ns=${TAG}h$h; ip=10.99.$X.$((h + 1))
    ip netns add "$ns" || skip "cannot create namespace $ns"
    NS="$NS $ns"
    ip -n "$SW" link add "v$h" type veth peer name e0 netns "$ns" &&
    ip -n "$SW" link set "v$h" master br0 && ip -n "$SW" link set "v$h" up &&
    ip -n "$ns" addr add "$ip/24" dev e0 && ip -n "$ns" link set e0 up &&
    ip -n "$ns" link set lo up || skip "cannot wire namespace $ns"
    start_sshd $h
    echo "$ip slots=1" >>"$TMP/hosts"
done
export PHX_RSH="ssh -i $TMP/key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
-o BatchMode=yes -o LogLevel=ERROR -o ConnectTimeout=10 -o ServerAliveInterval=1 -o ServerAliveCountMax=3"
for h in $(seq 1 $NH); do
    wait_for 20 $PHX_RSH "10.99.$X.$((h + 1))" true 2>/dev/null ||
        skip "sshd on 10.99.$X.$((h + 1)) does not answer: $(tail -3 "$TMP/sshd.$h.log")"
done
echo "# 4 hosts: 10.99.$X.2-5, namespaces $NS"

HB=$(hb_ms)
unset PHX_SECRET PHX_SECRET_FILE
# Bounds: startup over ssh, then a few deltas for the detection; no result
# is decided by a bound being short.
JOB_S=$(( 60 + 20 * HB / 1000 ))
run_bg() {   # run_bg NAME ARGS...: phx in the background, pid in $L
    n=$1; shift
    rm -f "$TMP"/ev.* "$TMP/pids"
    timeout -k 5 $JOB_S "$PHX" run -f "$TMP/hosts" --pidfile "$TMP/pids" "$@" \
        >"$TMP/$n.out" 2>"$TMP/$n.err" &
    L=$!; PIDS="$PIDS $L"
}
# kill_host H: every process of namespace H (its sshd, the node) dies, and
# is gone before it returns: an sshd started at once after it would find
# its address still bound by the old one and exit (seen once in CI).
host_empty() { [ -z "$(ip netns pids "${TAG}h$1")" ]; }
kill_host() {
    pids=$(ip netns pids "${TAG}h$1")
    [ -n "$pids" ] && kill -9 $pids
    wait_for "$JOB_S" host_empty "$1"
}

# ---- a job over ssh, and the secret on no command line -------------------------------
SECRET=phx-test-secret-$$-$RANDOM
GATE=$(gate_new secret)
PHX_SECRET=$SECRET PHX_EVENTLOG="$TMP/ev.%r.jsonl" run_bg secret --phx-ft=1 "$BIN/busy" --hold-until "$GATE" 0
spinning() { [ "$(event_count "$TMP/ev.*.jsonl" '"busy_spin"')" -ge $NH ]; }
if wait_for $JOB_S spinning; then
    check "ps: the secret is on no command line while the job runs" \
        eval '! ps -eww -o args | grep -q -- "[${SECRET%"${SECRET#?}"}]${SECRET#?}"'
    check "ps: each ssh carries PHX_SECRET_STDIN=1 instead" \
        eval '[ "$(ps -eww -o args | grep -c "^ssh .* 10\.99\.$X\.[0-9]* env .*PHX_SECRET_STDIN=1 .*busy")" = $NH ]'
    check "the remote nodes' environments hold no PHX_SECRET" eval '! for h in $(seq 1 $NH); do
        for p in $(ip netns pids ${TAG}h$h); do tr "\0" "\n" </proc/$p/environ 2>/dev/null; done; done | grep -q "^PHX_SECRET="'
else
    fail "busy over ssh starts on $NH hosts"; cat "$TMP/secret.err"
fi
gate_open "$GATE"
wait "$L"; rc=$?
check "busy over ssh on $NH hosts ends with 0 (rc $rc)" [ "$rc" = 0 ]
check "busy reports $NH nodes, none failed" grep -q "busy: done after .* $NH nodes, 0 failed" "$TMP/secret.out"

run_bg fib2 "$BIN/fib" 18
wait "$L"; rc=$?
check "fib(18) over ssh: exit 0 and the fault-free result (rc $rc)" \
    eval '[ $rc = 0 ] && grep -q "fib(18) = 2584 on $NH nodes.*OK" "$TMP/fib2.out"'

# ---- host loss covered by a recovery mode: busy registers phx_on_failure ------------
# lose HOW NAME: busy holds on a gate until every node spins; host 3 (rank
# 2) is lost; the gate opens once the launcher has seen the loss.
lose() {
    how=$1; name=$2
    GATE=$(gate_new "$name")
    PHX_EVENTLOG="$TMP/ev.%r.jsonl" run_bg "$name" --phx-ft=1 "$BIN/busy" --hold-until "$GATE" 0 10 2
    if ! wait_for $JOB_S spinning; then
        fail "$name: busy starts on $NH hosts"; gate_open "$GATE"; wait "$L"; return 1
    fi
    if [ "$how" = kill ]; then kill_host 3; else ip -n "$SW" link set v3 down; fi
    # The launcher sees rank 2's ssh end (at once, or after ServerAlive).
    wait_for $JOB_S grep -q "rank 2 .*connection lost\|rank 2 .*killed by signal" "$TMP/$name.err" ||
        fail "$name: the launcher sees rank 2 lost"
    # Rank 0 must have acted on the loss before it ends the job (a loss
    # known by silence only is acted on 3 delta later: partition fencing).
    wait_event "$TMP/ev.0.jsonl" '"ev":"failure"' $((JOB_S * 1000)) >/dev/null ||
        fail "$name: rank 0 learns of the loss"
    gate_open "$GATE"
    wait "$L"; rc=$?
    if [ "$how" = link ]; then ip -n "$SW" link set v3 up; fi
}
lose kill hostkill
check "host killed (every process of its namespace): busy survives, exit 0 (rc $rc)" [ "$rc" = 0 ]
check "host killed: rank 0 reports the end with 1 failed node" \
    grep -q "busy: done after .* $NH nodes, 1 failed" "$TMP/hostkill.out"
check "host killed: the launcher names the lost rank" grep -q "rank 2 (host 10.99.$X.4)" "$TMP/hostkill.err"

# Restart the killed host's sshd for the next runs.
start_sshd 3
wait_for "$JOB_S" $PHX_RSH "10.99.$X.4" true 2>/dev/null || fail "sshd on host 3 restarts"

lose link linkdown
check "host link down: busy survives, exit 0 (rc $rc)" [ "$rc" = 0 ]
check "host link down: rank 0 reports the end with 1 failed node" \
    grep -q "busy: done after .* $NH nodes, 1 failed" "$TMP/linkdown.out"
kill_host 3 2>/dev/null   # the cut-off node cannot hear its launcher

start_sshd 3
wait_for "$JOB_S" $PHX_RSH "10.99.$X.4" true 2>/dev/null || fail "sshd on host 3 restarts"

# ---- agreement across hosts: rank 2 dies inside agreement 1 ---------------------------
# Its ssh exits 255 (the remote side was killed); the agreements cover it.
run_bg agree --phx-ft=1 "$BIN/agree" -k 4 --die 2:1:sent
wait "$L"; rc=$?
check "agree over ssh, rank 2 killed mid-agreement: exit 0 (rc $rc)" [ "$rc" = 0 ]
for r in 0 1 3; do grep "^\[$r\] agree k=" "$TMP/agree.out" | sed 's/^\[[0-9]*\] //' >"$TMP/agree.$r"; done
check "agree: survivors 0, 1, 3 print the same 4 agreements, one reporting rank 2" eval \
    '[ "$(wc -l <"$TMP/agree.0")" = 4 ] && cmp -s "$TMP/agree.0" "$TMP/agree.1" &&
     cmp -s "$TMP/agree.0" "$TMP/agree.3" && [ "$(grep -c "failed=\[2\]" "$TMP/agree.0")" = 1 ]'

# ---- host loss no recovery mode covers: ring's token dies with its host ------------
run_bg ring --phx-ft=1 --phx-log=info "$BIN/ring" 1000000000000
if wait_for $JOB_S grep -q "starting the job" "$TMP/ring.err"; then
    kill_host 3
    wait "$L"; rc=$?
    check "host killed under ring: exit 76, work lost, never 0 (rc $rc)" [ "$rc" = 76 ]
    check "ring: the launcher says which rank was lost and why the code is not 0" \
        grep -q "phx: exit 76 (work lost): rank(s) 2 (connection lost)" "$TMP/ring.err"
else
    fail "ring starts over ssh"; kill "$L"
fi
finish
