#!/bin/bash
# Fault-tolerant agreement (ERA) through the launcher: 8 loopback nodes run
# back-to-back agreements while chosen ranks kill themselves at chosen
# points (apps/agree --die); every survivor must print the same value, the
# same failed set and the same code for every agreement, and a shrink must
# give the same members everywhere, over which an allreduce completes.
# Last, phx-ftcheck ack: phx_failure_ack is seen by agreements and groups.
# Usage: test_agree.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
N=8
K=5
# delta (hb-timeout): the default 1000 ms. 500 ms was not robust on a loaded
# 2-core box (false suspicions of live nodes).
HB=${PHX_HB_TIMEOUT:-1000}
export PHX_FT=1 PHX_TD=none PHX_HB_TIMEOUT=$HB
unset PHX_HB_PERIOD
# One job: startup plus a handful of failures, each detected and announced
# within a few delta (ft/hb/hb.h: T(1) = R(1) + B(n), R(1) <= 2 delta + tau);
# 20 delta plus 10 s of startup slack bounds it with a wide margin.
JOB_TIMEOUT=$((10 + 20 * HB / 1000))

# run NAME ARGS...: one job; output in $TMP/NAME.{out,err,rc}
run() {
    name=$1; shift
    timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n "$N" "$BIN/agree" -k "$K" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
    echo $? >"$TMP/$name.rc"
}

# lines KIND NAME RANK: that rank's lines of that kind, without the prefix.
lines() { sed -n "s/^\[$3\] \($1 .*\)/\1/p" "$TMP/$2.out"; }

# verify NAME "KILLED RANKS": every check on one job.
verify() {
    name=$1; killed=" $2 "
    survivors=""
    for r in $(seq 0 $((N - 1))); do
        case "$killed" in *" $r "*) ;; *) survivors="$survivors $r" ;; esac
    done
    first=${survivors# }; first=${first%% *}
    check "$name: job ends with code 0 (rc $(cat "$TMP/$name.rc"))" [ "$(cat "$TMP/$name.rc")" = 0 ]
    for r in $2; do
        check "$name: launcher saw rank $r killed" grep -q "rank $r (pid .*killed by signal 9" "$TMP/$name.err"
    done
    lines agree "$name" "$first" >"$TMP/ref"
    check "$name: rank $first printed $K agreements" [ "$(grep -c '^agree k=' "$TMP/ref")" = "$K" ]
    same=1
    for r in $survivors; do
        lines agree "$name" "$r" | cmp -s - "$TMP/ref" || { same=0; echo "  rank $r differs:"; lines agree "$name" "$r" | sed 's/^/    /'; }
    done
    check "$name: all survivors print the same values, failed sets and codes" [ "$same" = 1 ]
    check "$name: no participation error" sh -c "! grep -q WRONG '$TMP/$name.out'"
    # Every kill is reported exactly once, by exactly one agreement, and
    # an agreement's code is EPROCFAIL exactly when it reports failures.
    reported=$(sed -n 's/.*failed=\[\([0-9,]*\)\].*/\1/p' "$TMP/ref" | tr ',' '\n' | sed '/^$/d' | sort -n | tr '\n' ' ')
    want=$(echo "$2" | tr ' ' '\n' | sed '/^$/d' | sort -n | tr '\n' ' ')
    check "$name: failed sets report exactly the killed ranks [$want] (got [$reported])" [ "$reported" = "$want" ]
    check "$name: rc is EPROCFAIL exactly with a non-empty failed set" \
        sh -c "! grep -Eq 'failed=\[\] rc=EPROCFAIL|failed=\[[0-9].* rc=0' '$TMP/ref'"
    if grep -q -- --shrink "$TMP/$name.args"; then
        members=$(echo "$survivors" | sed 's/^ //; s/ /,/g')
        sh_same=1
        for r in $survivors; do
            [ "$(lines shrink "$name" "$r")" = "shrink size=$(echo $survivors | wc -w) members=[$members]" ] || sh_same=0
            lines allreduce "$name" "$r" | grep -q "^allreduce group=\[$members\] .* rc=0 OK$" || sh_same=0
        done
        check "$name: shrink gives [$members] everywhere and an allreduce over it completes" [ "$sh_same" = 1 ]
    fi
}

scenario() {   # scenario NAME "KILLED" ARGS...
    name=$1; killed=$2; shift 2
    echo "$*" >"$TMP/$name.args"
    run "$name" "$@"
    verify "$name" "$killed"
}

# The ERA tree over 8 members (arity 2, BFS): 0 is the root; 1 and 2 are
# its children; 1 -> 3,4; 2 -> 5,6; 3 -> 7. Leaves: 4 5 6 7.
scenario nofail      ""    --shrink
scenario root-dec    "0"   --shrink --die 0:2:decided            # root decides, dies before telling anyone
scenario root-sent   "0"   --shrink --die 0:2:sent               # root dies once its decision left
scenario interior    "1"   --shrink --die 1:2:sent               # contribution sent, then dead
scenario interior2   "2"   --shrink --die 2:2:decided            # dies holding the decision
scenario leaf        "6"   --shrink --die 6:2:sent
scenario two-kills   "1 5" --shrink --die 1:2:decided --die 5:2:sent
scenario root-and-child "0 2" --shrink --die 0:2:decided --die 2:2:decided
scenario between     "3"   --shrink --die 3:2:before             # dies between agreements 1 and 2
scenario op-or       "4"   --op or --die 4:1:sent

# Revoke: rank 5 revokes the world group before agreement 2. Its own
# contribution carries the flag, so agreements 2.. return EREVOKED at every
# member (new failures take precedence), and allreduce on it fails.
scenario revoke      ""    --shrink --revoke 5:2
check "revoke: agreements 0-1 clean, 2-4 EREVOKED" \
    [ "$(sed 's/.* rc=//' "$TMP/ref" | tr '\n' ' ')" = "0 0 EREVOKED EREVOKED EREVOKED " ]
check "revoke: allreduce on the revoked group fails everywhere" \
    [ "$(grep -c 'allreduce-revoked rc=EREVOKED revoked=1' "$TMP/revoke.out")" = "$N" ]
scenario revoke-kill "3"   --revoke 5:2 --die 3:3:sent
check "revoke-kill: the failure is reported (EPROCFAIL) over the revoke" \
    grep -q "failed=\[3\] rc=EPROCFAIL" "$TMP/ref"

# One acknowledged-failures state: phx_failure_ack reaches the
# agreement, the shrink and the shrunk group (tests/integration/ftcheck.c).
timeout -k 5 "$JOB_TIMEOUT" "$PHX" run -n 4 "$BIN/phx-ftcheck" ack >"$TMP/ack.out" 2>"$TMP/ack.err"
rc=$?
check "ack: phx-ftcheck ack exits 0 (rc $rc)" [ "$rc" = 0 ]
want="unacked=1 acked=1 after=0 agree=0 failed=0 shrink=0 failed=0 size=3"
check "ack: every survivor's agreement saw its phx_failure_ack ($want)" \
    [ "$(grep -c "ftcheck rank [0-2]: $want\$" "$TMP/ack.out")" = 3 ]
finish
