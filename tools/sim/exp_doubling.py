#!/usr/bin/python3
"""The issue's question: on a 16-core host agreement took 28, 50, 100, 210 us
and the plain allreduce 27, 44, 75, 157 us at n = 2, 4, 8, 16: doubling with
n. Is it the protocol? The simulator runs the real ERA with the runtime's
costs reduced to a fixed per-message latency and CPU cost, and counts the
messages on the critical path (causal depth of the decision) and per node.
The per-hop cost is fitted at n = 2 (28 us over the measured depth), so the
'protocol only' column is what ERA costs if nothing but the protocol grows."""
import os
from simlib import run, table, plot, HERE

NS = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
MEASURED_AGREE = {2: 28, 4: 50, 8: 100, 16: 210}
MEASURED_AR = {2: 27, 4: 44, 8: 75, 16: 157}


def main():
    base = ["--seed=1", "--hb=0", "--era=1", "--lat-us=10", "--cost-us=2", "--fifo=1"]
    res = {n: run(["--n=%d" % n] + base, check=True)[0]["era"] for n in NS}
    per_hop = MEASURED_AGREE[2] / res[2]["depth"]
    rows = []
    for n in NS:
        e = res[n]
        rows.append([n, e["depth"], "%.2f" % e["msgs_per_node"], e["msgs"],
                     "%.0f" % e["latency_us"], "%.0f" % (per_hop * e["depth"]),
                     MEASURED_AGREE.get(n, ""), MEASURED_AR.get(n, "")])
    table(os.path.join(HERE, "results", "doubling.md"),
          ["n", "critical-path msgs", "msgs/node", "msgs total", "sim latency us (10 us + 2 us/msg)",
           "protocol only, fitted at n=2 (us)", "measured agree us", "measured allreduce us"], rows)
    small = [n for n in NS if n <= 16]
    plot(os.path.join(HERE, "doubling.png"), "Agreement latency: protocol vs 16-core host",
         "latency (us)",
         [("measured agree (16-core host)", small, [MEASURED_AGREE[n] for n in small]),
          ("measured allreduce", small, [MEASURED_AR[n] for n in small]),
          ("sim ERA, 10 us + 2 us/msg", NS, [res[n]["latency_us"] for n in NS])],
         [("protocol only: depth x %.0f us (fit n=2)" % per_hop, NS,
           [per_hop * res[n]["depth"] for n in NS])])


if __name__ == "__main__":
    main()
