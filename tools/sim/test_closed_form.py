#!/usr/bin/python3
"""ctest sim_closed_form: phx-sim's message counts of the real
4C, EDOD and ERA state machines equal closed forms, exactly.

Workload: the token of Theorem 1 (001_*) on the ring walk (hop i goes from
rank (i-1) mod P to i mod P), K hops, 1 ms of work per hop so control
traffic settles between hops (the theorem's synchronous steps), P >= 8.
Tree: the binary heap of 001 §2.1 (parent (r-1)/2), A = LCA(x, y).

  4C   = 2(P-1) (K + 1 - floor(K/P))
         a wave (P-1 STOPs up, P-1 DOWNs) per hop plus the confirming one;
         a hop into an ancestor of its sender (the root, floor(K/P) times)
         is seen by the wave already blocked at the sender (Theorem 1's
         exception).
  EDOD = 2(P-1) - 3 + sum over hops x->y of [d(x,A) + 2 d(y,A) + 1] + depth(y_K)
         P-1 initial STOPs and P-1 TERMINATEs; per hop RESUMEs up from y to
         the first active ancestor (A), ACK_Ts back down, one ACK, and STOPs
         from x up to A; at the end STOPs from the last holder to the root.
         -3: the first hop reaches rank 1 before its own initial STOP (its
         subtree is 2 levels deep), so it costs an ACK only (not RESUME +
         ACK_T + ACK) and rank 1 never sends that STOP.
  ERA (failure-free, 002_*): 2(n-1) messages (one up and one down per tree
         edge) and 2 floor(log2 n) on the critical path (up and down the
         heap tree's height), for any n.

Network: 10 us + uniform 0..10 us per message (FIFO), 2 us CPU per message,
two seeds: the counts do not depend on the draws."""
import json
import math
import subprocess
import sys

SIM = sys.argv[1] if len(sys.argv) > 1 else "build/bin/phx-sim"
NET = ["--lat-us=10", "--jitter-us=10", "--dist=uniform", "--fifo=1", "--cost-us=2"]


def sim(args):
    p = subprocess.run([SIM] + args + NET, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("phx-sim %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
    return json.loads(p.stdout.strip().splitlines()[-1])


def ancestors(r):
    a = [r]
    while r:
        r = (r - 1) // 2
        a.append(r)
    return a


def lca_dists(x, y):
    ax, ay = ancestors(x), ancestors(y)
    sy = set(ay)
    for i, a in enumerate(ax):
        if a in sy:
            return i, ay.index(a)


def four_c(P, K):
    return 2 * (P - 1) * (K + 1 - K // P)


def edod(P, K):
    t = 2 * (P - 1) - 3
    y = 0
    for i in range(1, K + 1):
        x, y = (i - 1) % P, i % P
        dx, dy = lca_dists(x, y)
        t += dx + 2 * dy + 1
    return t + len(ancestors(y)) - 1


def main():
    fails = checks = 0
    for P in (8, 33, 100, 1024):
        for K in sorted({1, 7, P - 1, P, 2 * P + 3, 100}):
            for seed in (1, 2):
                for td, want in (("4c", four_c(P, K)), ("edod", edod(P, K))):
                    o = sim(["--n=%d" % P, "--seed=%d" % seed, "--hb=0", "--td=" + td,
                             "--td-hops=%d" % K, "--task-us=1000", "--td-walk=ring", "--check"])
                    got = o["td"]["ctrl"]
                    checks += 1
                    if got != want or o["td"]["premature"]:
                        fails += 1
                        print("FAIL %s P=%d K=%d seed=%d: %d control messages, closed form %d"
                              % (td, P, K, seed, got, want))
    for n in (2, 3, 7, 8, 100, 1000, 1024, 1025, 3000):
        for seed in (1, 2):
            o = sim(["--n=%d" % n, "--seed=%d" % seed, "--hb=0", "--era=1", "--check"])
            e = o["era"]
            want_depth = 2 * int(math.floor(math.log2(n)))
            checks += 1
            if e["msgs"] != 2 * (n - 1) or e["depth"] != want_depth or not e["agree"]:
                fails += 1
                print("FAIL era n=%d seed=%d: %d messages (2(n-1) = %d), depth %d "
                      "(2 floor(log2 n) = %d), agree %d"
                      % (n, seed, e["msgs"], 2 * (n - 1), e["depth"], want_depth, e["agree"]))
    print("sim_closed_form: %d checks, %d failed" % (checks, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
