#!/usr/bin/python3
"""Experiment 2: BCASTMSG copies per node for one failure notice
against n, beside the hypercube broadcast's exact cost: ncubes * k * (2^k - 1)
copies for m = n - 1 members, k = floor(log2 m) (ft/hb/bcast.h: k binomial
trees per k-cube, one or two cubes). Two sources: the full heartbeat runs of
exp_detect.py (f = 1, to 65536 now that ft/hb shares its ring), and
--bcast-only, which drives ft/hb/bcast.c alone (O(1) per node) up to 65536,
once failure-free and once with k - 1 members crashed unknown to the origin
(the broadcast's tolerance): every live member must still be reached."""
import os
from simlib import NET, DELTA_MS, run, table, plot, log2, HERE

NS = [int(x) for x in os.environ.get("SIM_NS", "1024 4096 16384 65536").split()]
NS_BC = [1024, 4096, 16384, 65536]


def exact(n):
    m = n - 1
    k = log2(m)
    return (1 if m == 1 << k else 2) * k * ((1 << k) - 1) / n


def main():
    rows, xs, ys = [], [], []
    for n in NS:
        o, _ = run(["--n=%d" % n, "--seed=1", "--delta-ms=%d" % DELTA_MS, "--stop-early=1",
                    "--until-ms=600000"] + NET + ["--crash-random=1@3000"])
        hb = o["hb"]
        rows.append([n, "ft/hb, 1 crash", hb["bcast"], "%.3f" % hb["bcast_per_node"],
                     "%.3f" % exact(n), "-", "-", "-", "-"])
        xs.append(n), ys.append(hb["bcast_per_node"])
    bx, by, bt = [], [], []
    for n in NS_BC:
        o, w = run(["--n=%d" % n, "--seed=1", "--bcast-only=1"] + NET, check=True)
        k = o["bcast_only"]["k"]
        f, wf = run(["--n=%d" % n, "--seed=1", "--bcast-only=1",
                     "--crash-random=%d@0" % (k - 1)] + NET, check=True)
        b, bf = o["bcast_only"], f["bcast_only"]
        rows.append([n, "bcast.c only", b["msgs"], "%.3f" % b["per_node"], "%.3f" % exact(n),
                     "%d / %d" % (b["hops"], b["max_hops"]), "%.0f" % b["latency_us"],
                     "%d crashed: missed %d, %d hops" % (k - 1, bf["missed"], bf["hops"]),
                     "%.1f" % (w + wf)])
        bx.append(n), by.append(b["per_node"]), bt.append(exact(n))
    table(os.path.join(HERE, "results", "bcast.md"),
          ["n", "driver", "BCASTMSG total", "per node", "ncubes k (2^k-1) / n",
           "hops (last member) / bound k+1", "latency us", "k-1 unknown failures", "wall s"], rows)
    plot(os.path.join(HERE, "bcast.png"), "Broadcast of one failure notice",
         "BCASTMSG copies per node",
         [("ft/hb (full detector)", xs, ys), ("ft/hb/bcast.c only", bx, by)],
         [("ncubes k (2^k-1) / n", bx, bt)])


if __name__ == "__main__":
    main()
