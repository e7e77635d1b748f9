#!/usr/bin/python3
"""Experiment 4: termination-detection control messages against
n for every detector, on the token of Theorem 1 (001_*): K hops to uniform
ranks, each hop 1 ms of work so control traffic settles (the theorem's
synchronous steps). Bounds of Theorem 1 ("Comparing Distributed Termination Detection Algorithms
for Task-Based Runtime Systems on HPC platforms", section 3.1):
4C >= K P + P, EDOD >= 3 K log2 P + 2 P, HCDA = K (1 + 2/32) + P, CDA <= 2 P.
The fault-tolerant detectors (indep, rellazy, releager) run failure-free;
their per-rank tables (ft/termination/td_ds.c) are lazily backed, so they run
to SIM_TD_FT_MAX (default 65536) too."""
import math
import os
from simlib import NET, run, table, plot, HERE

NS = [int(x) for x in os.environ.get("SIM_TD_NS", "1024 4096 16384 65536").split()]
FT_MAX = int(os.environ.get("SIM_TD_FT_MAX", "65536"))
K = 100
BOUND = {
    "4c": lambda P: K * P + P,
    "edod": lambda P: 3 * K * math.log2(P) + 2 * P,
    "hcda": lambda P: K * (1 + 2 / 32) + P,
    "cda": lambda P: 2 * P,
}


def main():
    rows, series, bounds = [], [], []
    for td in ["4c", "edod", "hcda", "cda", "indep", "rellazy", "releager"]:
        xs, ys = [], []
        for n in NS:
            if td not in BOUND and n > FT_MAX:
                continue
            o, wall = run(["--n=%d" % n, "--seed=1", "--hb=0", "--td=%s" % td,
                           "--td-hops=%d" % K, "--task-us=1000"] + NET, check=True)
            t = o["td"]
            b = BOUND[td](n) if td in BOUND else None
            rows.append([td, n, t["ctrl"], "%.2f" % t["ctrl_per_node"],
                         "%.0f" % b if b else "-", t["premature"], t["declared"],
                         "%.0f" % t["latency_us"], "%.0f" % o["rss_per_node_bytes"], "%.1f" % wall])
            xs.append(n), ys.append(t["ctrl"])
        series.append((td, xs, ys))
        if td in BOUND:
            bounds.append(("Thm 1 " + td, xs, [BOUND[td](x) for x in xs]))
    table(os.path.join(HERE, "results", "td.md"),
          ["detector", "n", "control msgs", "per node", "Theorem 1", "premature", "declared",
           "detect latency us", "bytes/node", "wall s"], rows)
    plot(os.path.join(HERE, "td.png"), "Termination detection, token of Theorem 1 (K = %d)" % K,
         "control messages (total)", series, bounds)


if __name__ == "__main__":
    main()
