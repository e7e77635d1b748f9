#!/bin/bash
# BC on GLB/FTGLB end to end (issue 12, digest section 5 row 11): the
# betweenness vector (fixed point, bit-exact) equals --seq on P = 1, 2, 4, 8
# with glb-ft off and on, and with deaths that land by construction
# (--glb-die at a protocol point): one rank mid-run, two non-adjacent ranks
# at once, a rank with its backup (clean abort), rank 0 (the first
# reduction root) at the start, mid-run, during a termination wave and
# then the new root too (exact), rank 0 with its backup (clean abort).
# The sequential vector is cross-checked against networkx on the dumped graph when python3-networkx
# is installed.
# Usage: test_bc.sh BINDIR   Env: PHX_HB_TIMEOUT (delta, ms), SEED.
BIN=$1
. "$(dirname "$0")/../../ext/glb/glb_it.sh"
APP=$BIN/bc
ARGS="-n 10 -s 2 --glb-n=4"
WANT=$("$APP" -n 10 -s 2 --seq --dump-graph "$TMP/g.txt" --out "$TMP/seq.txt" | head -1)
check "seq: runs ($WANT)" [ -n "$WANT" ]
if python3 -c 'import networkx' 2>/dev/null; then
    python3 - "$TMP/g.txt" "$TMP/seq.txt" <<'PY'
import sys, networkx as nx
g = nx.DiGraph()
mine = {int(a): float(b) for a, b in (l.split() for l in open(sys.argv[2]))}
g.add_nodes_from(mine)
g.add_edges_from(tuple(map(int, l.split())) for l in open(sys.argv[1]))
ref = nx.betweenness_centrality(g, normalized=False)
err = max(abs(ref[v] - mine[v]) for v in ref)
print("# networkx max abs error", err)
sys.exit(0 if err < 1e-4 else 1)
PY
    check "seq: equals networkx on the dumped graph" [ $? = 0 ]
else
    echo "# networkx not installed: external cross-check skipped"
fi

for n in 1 2 4 8; do expect_exact "p$n-fton" $n --glb-ft=on; done
expect_exact p4-ftoff 4 --glb-ft=off
expect_exact p2-threads2 2 --glb-ft=on --glb-threads=2
N=8
R=$(( 1 + SEED % (N - 1) ))
expect_exact midrun $N --glb-ft=on --glb-die=P:$R:1
expect_exact two $N --glb-ft=on --glb-die=P:2:1:kill=6
expect_lost pair 3 4 $N --glb-ft=on --glb-die=P:3:1:kill=4
# Rank 0, the first reduction root: mid-run and while it collects a
# termination wave; the next root reports the exact vector.
expect_root root-start $N --glb-ft=on --glb-die=U:0:1     # only 0 and 1 got the table
expect_root root-midrun $N --glb-ft=on --glb-die=P:0:1
expect_root root-wave 4 --glb-ft=on --glb-die=WR:0:1
# Then the new root lost too, once it backed up rank 0's adopted state.
expect_root root-chain $N --glb-ft=on --glb-die=P:0:1,R5:1:1
check "root-chain: rank 1, the new root, died too" grep -q "rank 1 dies at R5" "$TMP/root-chain.err"
# Drain: rank D gets SIGTERM mid-run (the :term hook), hands its bag and
# result over and exits 0; exact vector, nothing adopted from a crash.
D=$(( 1 + (SEED / 3) % (N - 1) ))
expect_drain drain-midrun $D $N --glb-ft=on --glb-die=P:$D:1:term
# Rank 0 with its Back (rank 1 kills both): a clean abort naming the loss.
expect_lost root-pair 0 1 $N --glb-ft=on --glb-die=P:0:1:kill=1
finish
