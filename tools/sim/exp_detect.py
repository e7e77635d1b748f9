#!/usr/bin/python3
"""Experiment 1: failure detection and notification time against
n for 1, floor(log2 n) - 1 (random and ring-adjacent) and n/2 failures, beside
the seed's T(f) bound (002_*). Also feeds exp_bcast.py's per-node counts.
Crashes are silent (no TCP reset), all at t = 3 s, delta = 1 s, eta = 100 ms.
SIM_NS (default "1024 4096 16384 65536") and SIM_HALF_NS (n/2 runs, default
"1024 2048 4096 8192 16384") choose the sizes: n/2 failures are n/2 broadcasts of
about n log n copies each, so their events grow as n^2 log n (bytes too, since
the compact broadcast bounds a copy's size; see README)."""
import os
from simlib import NET, DELTA_MS, run, table, plot, log2, t_bound_ms, HERE

NS = [int(x) for x in os.environ.get("SIM_NS", "1024 4096 16384 65536").split()]
HALF = [int(x) for x in os.environ.get("SIM_HALF_NS", "1024 2048 4096 8192 16384").split()]


def cases(n):
    L = log2(n) - 1
    if n in NS:
        yield "1", 1, ["--crash-random=1@3000"]
        yield "log n-1 random", L, ["--crash-random=%d@3000" % L]
        yield "log n-1 adjacent", L, ["--crash-adjacent=%d@3000" % L]
    if n in HALF:
        yield "n/2 random", n // 2, ["--crash-random=%d@3000" % (n // 2)]


def main():
    rows, series = [], {}
    for n in sorted(set(NS + HALF)):
        for label, f, fa in cases(n):
            args = ["--n=%d" % n, "--seed=1", "--delta-ms=%d" % DELTA_MS, "--stop-early=1",
                    "--until-ms=600000"] + NET + fa
            o, wall = run(args)
            hb = o["hb"]
            bound = t_bound_ms(f, n) if f <= log2(n) - 1 else None
            rows.append([n, label, f, "%.1f" % hb["detect_ms"], "%.1f" % hb["notify_ms"],
                         "%.0f" % bound if bound else "n/a (f > log n - 1)",
                         "%.1f" % hb["bcast_per_node"],
                         "%.0f" % (hb["bytes_per_node"] / 1024) if "bytes_per_node" in hb else "-",
                         hb["deadset_agree"], hb["unnotified"],
                         "%.0f" % (o["rss_per_node_bytes"] / 1024), "%.1f" % wall])
            series.setdefault(label, []).append((n, hb["notify_ms"], bound))
    table(os.path.join(HERE, "results", "detect.md"),
          ["n", "failures", "f", "detect ms", "notify ms (all survivors)", "T(f) bound ms",
           "BCASTMSG/node", "KiB sent/node (hb)", "same D", "unnoticed", "KiB/node", "wall s"], rows)
    s = [(k, [x[0] for x in v], [x[1] for x in v]) for k, v in series.items()]
    b = [("T(f) bound, " + k, [x[0] for x in v], [x[2] for x in v])
         for k, v in series.items() if all(x[2] for x in v)]
    plot(os.path.join(HERE, "detect.png"), "Failure known to every survivor (delta = 1 s)",
         "time after the crashes (ms)", s, b)


if __name__ == "__main__":
    main()
