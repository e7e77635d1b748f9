#!/usr/bin/python3
"""Experiment 5: recovery time of recovery=cr against n and
against the state size. One silent crash (rank 5) at t = 3 s; phx-sim's
--cr=1 drives ft/hb (detection) and ft/ckpt's real round table, buddies and
relocation with core/cr*.c's message pattern (STATE / DECIDE carrying n
flags, a rollback MARK on every link, the buddy shipping the 32 slices, DONE,
GO) over a 10 Gb/s NIC per node, restoring at 1 GB/s (see README).
SIM_CR_NS (default "1024 4096 16384") and SIM_CR_MB ("1 16 64 256 1024 4096", at
n = 1024) choose the runs; 65536 needs the coordinator's n*n-byte round
table (4 GiB)."""
import os
from simlib import NET, DELTA_MS, run, table, plot, HERE

NS = [int(x) for x in os.environ.get("SIM_CR_NS", "1024 4096 16384").split()]
MBS = [float(x) for x in os.environ.get("SIM_CR_MB", "1 16 64 256 1024 4096").split()]
BW_GBPS, RESTORE_GBPS = 10.0, 8.0


def model_ms(n, mb):
    """What the model must give once detected. Agreement: the coordinator
    takes n STATEs of n+8 bytes through its NIC and copies each n-flag set
    (CPU), 2 us per message: max(NIC, copy) + n * 2 us. Then DECIDE (n+9
    bytes) to everyone through its NIC; a survivor restores its state while
    the buddy ships 31/32 of the dead node's; the last host restores its
    slice. ms."""
    b = mb * 1048576
    ns = lambda byts, gbps: byts * 8 / gbps / 1e6
    agree = max(ns(n * (n + 8), BW_GBPS), ns(n * n, RESTORE_GBPS)) + n * 2e-3
    after = ns(n * (n + 9), BW_GBPS) + max(ns(b, RESTORE_GBPS), ns(b * 31 / 32, BW_GBPS)) + \
        ns(b / 32, RESTORE_GBPS)
    return agree, after


def one(n, mb):
    args = ["--n=%d" % n, "--seed=1", "--delta-ms=%d" % DELTA_MS, "--stop-early=1", "--cr=1",
            "--state-mb=%g" % mb, "--crash=5@3000"] + NET
    o, wall = run(args, check=True)
    c = o["cr"]
    agree, xfer = model_ms(n, mb)
    row = [n, "%g" % mb, "%.1f" % c["detect_ms"], "%.1f" % (c["decide_ms"] - c["detect_ms"]),
           "%.1f" % agree, "%.1f" % (c["done_ms"] - c["decide_ms"]), "%.1f" % xfer,
           "%.1f" % (c["go_ms"] - c["done_ms"]),
           "%.1f" % c["go_ms"], c["msgs"], c["marks"], "%.0f" % (c["bytes_per_node"] / 1024),
           "%.0f" % c["coord_table_mib"], c["unfinished"], "%.1f" % wall]
    return row, c


def main():
    head = ["n", "state MiB", "detect ms", "agree ms", "model", "decide to last DONE ms", "model",
            "GO ms", "recovery ms (crash to last GO)", "msgs",
            "MARKs", "KiB/node", "coord table MiB", "not resumed", "wall s"]
    rows, by_n, by_mb = [], [], []
    for n in NS:
        r, c = one(n, 64)
        rows.append(r)
        by_n.append((n, c))
    for mb in MBS:
        r, c = one(1024, mb)
        if mb != 64 or 1024 not in NS:
            rows.append(r)
        by_mb.append((mb, c))
    table(os.path.join(HERE, "results", "cr.md"), head, rows)
    plot(os.path.join(HERE, "cr.png"), "recovery=cr after one crash (64 MiB per node)",
         "ms after the crash",
         [("last GO (recovery done)", [n for n, _ in by_n], [c["go_ms"] for _, c in by_n]),
          ("decision", [n for n, _ in by_n], [c["decide_ms"] for _, c in by_n]),
          ("agreement only (decision - detection)", [n for n, _ in by_n],
           [max(c["decide_ms"] - c["detect_ms"], 1e-3) for _, c in by_n])],
         [("model: agreement", [n for n, _ in by_n], [model_ms(n, 64)[0] for n, _ in by_n])])
    plot(os.path.join(HERE, "cr_state.png"), "recovery=cr after one crash, n = 1024",
         "ms from detection to the last GO",
         [("phx-sim", [m for m, _ in by_mb], [c["go_ms"] - c["detect_ms"] for _, c in by_mb])],
         [("model: agreement + DECIDE + restore / shipping", [m for m, _ in by_mb],
           [sum(model_ms(1024, m)) for m, _ in by_mb])], xlabel="state per node (MiB)")


if __name__ == "__main__":
    main()
