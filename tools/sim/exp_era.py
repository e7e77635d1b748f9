#!/usr/bin/python3
"""Experiment 3: ERA agreement rounds and latency against n,
failure-free and with the root (rank 0) dying mid-agreement: right after it
sent its first decision message (--crash-on=0:era:1), and at a time while the
contributions climb. n <= 65536: PHX_FT_ERA_ENGINE_MAX_RANKS (ft/era/era.h)."""
import math
import os
from simlib import NET, DELTA_MS, TAU_US, run, table, plot, HERE

NS = [int(x) for x in os.environ.get("SIM_ERA_NS", "4 8 16 32 64 128 256 512 1024 4096 16384 65536").split()]


def main():
    rows, lat, dep, bnd, lat_f = [], [], [], [], []
    for n in NS:
        ff, _ = run(["--n=%d" % n, "--seed=1", "--hb=0", "--era=1"] + NET, check=True)
        rf, _ = run(["--n=%d" % n, "--seed=1", "--era=1", "--era-at-ms=3000",
                     "--crash-on=0:era:1", "--delta-ms=%d" % DELTA_MS] + NET, check=True)
        rt, _ = run(["--n=%d" % n, "--seed=1", "--era=1", "--era-at-ms=3000",
                     "--crash=0@3000.02", "--delta-ms=%d" % DELTA_MS] + NET, check=True)
        e, r, t = ff["era"], rf["era"], rt["era"]
        b = 2 * math.ceil(math.log2(n))
        rows.append([n, e["depth"], b, "%.1f" % e["latency_us"], "%.1f" % (b * TAU_US),
                     "%.2f" % e["msgs_per_node"], e["agree"],
                     "%.1f" % (r["latency_us"] / 1000), "%.1f" % r["after_notice_us"],
                     "%.2f" % r["msgs_per_node"], r["agree"],
                     "%.1f" % (t["latency_us"] / 1000), "%.1f" % t["after_notice_us"],
                     "%.2f" % t["msgs_per_node"], t["agree"]])
        lat.append(e["latency_us"]), dep.append(e["depth"]), bnd.append(b * TAU_US)
        lat_f.append(r["after_notice_us"])
    table(os.path.join(HERE, "results", "era.md"),
          ["n", "rounds (critical path)", "2 ceil(log2 n)", "latency us", "2 ceil(log2 n) tau us",
           "msgs/node", "agreed", "root dies after 1st decision msg: ms", "after notice us",
           "msgs/node", "agreed", "root dies at +20 us: ms", "after notice us", "msgs/node",
           "agreed"], rows)
    plot(os.path.join(HERE, "era.png"), "ERA agreement", "latency (us)",
         [("failure-free latency", NS, lat),
          ("root dies: decision after the last notice", NS, lat_f)],
         [("2 ceil(log2 n) tau", NS, bnd)])


if __name__ == "__main__":
    main()
