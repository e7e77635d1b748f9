#!/bin/bash
# Link recovery (net/README.md): a connection between two live nodes is cut
# (PHX_DEBUG_CUT_LINK=RANK:PEER:FRAMES[:TIMES] resets it with RST after RANK
# has read FRAMES frames from PEER on it, so the cut lands inside the work by
# construction) during a ring run and during ERA agreements. The link must
# come back with nothing lost or repeated: the job prints the fault-free
# result and exits 0, and no node is declared dead.
# Usage: test_link.sh BINDIR
set -u
BIN=$1
. "$(dirname "$0")/lib.sh"
PHX=$BIN/phx
# A cut link must come back before hb-timeout or the detector suspects
# the peer (the check below): with a second suite on the same 2 cores a
# redial can take over a second (a fresh-clone CI run beside another
# failed "no node declared dead" once at 1000).
HB=${PHX_HB_TIMEOUT:-3000}
export PHX_SECRET=it-secret PHX_TD=none PHX_HB_TIMEOUT=$HB PHX_LOG=info
unset PHX_HB_PERIOD
# A loaded 2-core box can slow a hop to milliseconds: generous, and still
# far below the ctest limit.
JOB_TIMEOUT=$((60 + 20 * HB / 1000))

# job NAME CUT ARGS...: one launcher run; output in $TMP/NAME.{out,err}, rc in $rc
job() {
    name=$1; cut=$2; shift 2
    PHX_DEBUG_CUT_LINK=$cut timeout -k 5 "$JOB_TIMEOUT" "$PHX" run "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    rc=$?
}

# common NAME CUTTER PEER TIMES: the cuts happened, the link came back each
# time, nobody was declared dead or fenced.
common() {
    name=$1; cutter=$2; peer=$3; times=$4
    cuts=$(grep -c "^\[$cutter\] .*PHX_DEBUG_CUT_LINK: cutting the link to rank $peer" "$TMP/$name.err")
    check "$name: rank $cutter cut its link to rank $peer $times times (got $cuts)" [ "$cuts" = "$times" ]
    back=$(grep -c "^\[$cutter\] .*link to rank $peer restored" "$TMP/$name.err")
    check "$name: the link was restored after every cut (got $back)" [ "$back" = "$times" ]
    # The frame the cut fell on was never acknowledged, so every restore
    # resends something.
    rs=$(grep -c "^\[$peer\] .*link to rank $cutter restored .*resending [1-9][0-9]* unacknowledged bytes" "$TMP/$name.err")
    check "$name: rank $peer resent unacknowledged frames after every cut (got $rs)" [ "$rs" = "$times" ]
    check "$name: no node declared dead or fenced" \
        sh -c "! grep -Eq 'is dead|declared dead|fenced|not restored' '$TMP/$name.err'"
}

# agreements NAME RANK: that rank's agreement lines, without the prefix.
agreements() { sed -n "s/^\[$2\] \(agree .*\)/\1/p" "$TMP/$1.out"; }
# same_as_ref NAME RANKS...: each of those ranks printed exactly $TMP/ref.
same_as_ref() {
    name=$1; shift
    for r in "$@"; do agreements "$name" "$r" | cmp -s - "$TMP/ref" || return 1; done
}

# 1. Ring, fault tolerance on: rank 2 cuts its link to rank 1 (its
# heartbeat emitter and ring predecessor) three times; every cut drops
# frames in flight, which rank 1 must resend. Rank 2 reads at least 400
# tokens from rank 1, so the 3 cuts after 100 frames each land in the run.
PHX_FT=1 job ring_ft 2:1:100:3 -n 4 "$BIN/ring" 400
check "ring_ft: exits 0 (rc $rc)" [ "$rc" = 0 ]
check "ring_ft: fault-free result" grep -q "^\[0\] ring: 4 nodes x 400 laps = 1600 hops .* OK$" "$TMP/ring_ft.out"
common ring_ft 2 1 3

# 2. Ring, fault tolerance off (where a lost link used to end the job with
# code 70): ten cuts of the 0-1 link, after 40 of the 500 tokens each.
PHX_FT=0 job ring_noft 0:1:40:10 -n 2 "$BIN/ring" 500
check "ring_noft: exits 0 (rc $rc)" [ "$rc" = 0 ]
check "ring_noft: fault-free result" grep -q "^\[0\] ring: 2 nodes x 500 laps = 1000 hops .* OK$" "$TMP/ring_noft.out"
common ring_noft 0 1 10

# 3. ERA: 8 nodes, 20 agreements; rank 3 cuts its link to rank 1, its
# parent in the agreement tree and not a heartbeat neighbour, so the only
# frames on it are the agreements' own: the 3 cuts (after 5 frames each)
# land inside them.
K=20
PHX_FT=1 job era 3:1:5:3 -n 8 "$BIN/agree" -k $K
check "era: exits 0 (rc $rc)" [ "$rc" = 0 ]
agreements era 0 >"$TMP/ref"
check "era: rank 0 printed $K fault-free agreements" \
    [ "$(grep -c '^agree k=[0-9]* value=0x[0-9a-f]* failed=\[\] rc=0$' "$TMP/ref")" = "$K" ]
check "era: every rank printed the same agreements" same_as_ref era 1 2 3 4 5 6 7
common era 3 1 3

# 4. A link between two live non-neighbours that cannot be restored (cut for
# good after 5 agreement frames): the heartbeat ring cannot see it, so after
# 3 delta the higher rank of the pair (3) leaves as fenced, the ring declares
# it dead, and every survivor reports the same failure in the same agreement.
PHX_FT=1 job era_split 3:1:5:0 -n 8 "$BIN/agree" -k $K
check "era_split: exits 0 (rc $rc)" [ "$rc" = 0 ]
check "era_split: rank 3 leaves, fenced" grep -q "phx: rank 3 fenced" "$TMP/era_split.err"
check "era_split: rank 3 says why" grep -q "^\[3\] .*link to live rank 1 lost for good" "$TMP/era_split.err"
agreements era_split 0 >"$TMP/ref"
check "era_split: rank 0 printed $K agreements" [ "$(grep -c '^agree k=' "$TMP/ref")" = "$K" ]
check "era_split: exactly one reports failed=[3], with EPROCFAIL; the others none" \
    [ "$(grep -c 'failed=\[3\] rc=EPROCFAIL$' "$TMP/ref")" = 1 -a "$(grep -c 'failed=\[\] rc=0$' "$TMP/ref")" = $((K - 1)) ]
check "era_split: every survivor printed the same agreements" same_as_ref era_split 1 2 4 5 6 7
check "era_split: nobody else declared dead" sh -c "! grep -E 'rank [0-24-7] is dead' '$TMP/era_split.err'"

# 5. A flood of 8-byte messages, which travel in BATCH frames of many
# messages each (net/README.md): rank 1 cuts its link to rank 0 three times,
# each after 3 frames on the new connection, so every cut falls among
# batches in flight. Each batch is resent whole or dropped whole as a
# duplicate: the stream of 200,000 messages arrives complete (a lost one
# would leave the job waiting for it) and no message reaches its task twice
# (the task layer's duplicate check, logged at debug, stays silent).
PHX_LOG=debug job flood 1:0:3:3 -n 2 "$BIN/pingpong" rate 200000
check "flood: exits 0 (rc $rc)" [ "$rc" = 0 ]
check "flood: every message arrived" grep -q "^\[0\] pingpong rate size=8 n=200000 " "$TMP/flood.out"
check "flood: the messages travelled in batches" \
    grep -q "^\[1\] .*batches: [1-9][0-9]* frames received carrying [1-9][0-9]* messages" "$TMP/flood.err"
common flood 1 0 3
check "flood: no message reached its task twice" sh -c "! grep -q 'duplicate ssn' '$TMP/flood.err'"
finish
