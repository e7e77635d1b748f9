#!/usr/bin/python3
"""Experiment 6: recovery of recovery=mlog-causal against cr, in
n and in the state size. Both run the same app, a 1-D stencil on the rank
ring (phx-sim --app=1: 10 ms of compute per step, then one message to each
neighbour; the last checkpoint at t = 2 s), and lose rank 5 at t = 3 s.
cr (--cr=1 --app=1): every task rolls back to the checkpoint and runs the
lost second again. mlog-causal (--mlog=1): the real ft/mlog SCML logs every
remote message and piggybacks dets; the recovery round is cr's, partial
(survivors keep their state: no restore, no MARKs), decided and carried
by every node's real ft/mlog/rec machine: the survivors hand back dets and
logged messages, send RDONE (then RFIN) to every live rank, and only the
dead rank's task replays, on its first slice's host. "caught up" = every task back at the step it had
reached at the crash. SIM_ML_NS (default "1024 4096 16384") and SIM_ML_MB
("1 16 64 256 1024 4096", at n = 1024) choose the runs."""
import os
from simlib import NET, DELTA_MS, run, table, plot, HERE

NS = [int(x) for x in os.environ.get("SIM_ML_NS", "1024 4096 16384").split()]
MBS = [float(x) for x in os.environ.get("SIM_ML_MB", "1 16 64 256 1024 4096").split()]
MODES = [("cr", ["--cr=1", "--app=1"]), ("mlog-causal", ["--mlog=1"])]


def one(n, mb, mode, extra):
    args = ["--n=%d" % n, "--seed=1", "--delta-ms=%d" % DELTA_MS, "--stop-early=1",
            "--state-mb=%g" % mb, "--crash=5@3000"] + extra + NET
    o, wall = run(args, check=True)
    c, a = o["cr"], o["app"]
    ml = mode != "cr"
    row = [n, "%g" % mb, mode, "%.1f" % c["detect_ms"], "%.1f" % c["go_ms"],
           "%.1f" % a["release_ms"] if ml else "-", "%.1f" % a["caught_ms"],
           "%.1f" % (a["caught_ms"] - (a["release_ms"] if ml else c["go_ms"])),
           "%.2f" % a["redone_node_s"], c["marks"] + a["rdone_counted"], a.get("rfins", "-") if ml else "-",
           "%.0f" % (a["back_bytes"] / 1024) if ml else "-",
           "%.0f / %.0f" % (a["pb_bytes_per_msg"], a["ack_bytes_per_msg"]) if ml else "-",
           a["log_max"] if ml else "-", a["gap"] if ml else "-",
           "%.0f" % (o["rss_per_node_bytes"] / 1024), "%.1f" % wall]
    return row, o


def main():
    head = ["n", "state MiB", "recovery", "detect ms", "last GO ms", "released ms",
            "caught up ms", "release (mlog) or GO (cr) to caught up ms", "work redone (node-s)", "MARKs + RDONEs", "RFINs",
            "hand-back KiB", "trailer / ack B per app msg", "log entries (max node)", "det gaps",
            "KiB/node", "wall s"]
    rows, by_n, by_mb = [], {}, {}
    for n in NS:
        for mode, extra in MODES:
            r, o = one(n, 64, mode, extra)
            rows.append(r)
            by_n.setdefault(mode, []).append((n, o))
    for mb in MBS:
        for mode, extra in MODES:
            r, o = one(1024, mb, mode, extra)
            if mb != 64 or 1024 not in NS:
                rows.append(r)
            by_mb.setdefault(mode, []).append((mb, o))
    table(os.path.join(HERE, "results", "mlog.md"), head, rows)
    ser = []
    for mode, v in by_n.items():
        ser.append((mode + ": caught up", [n for n, _ in v], [o["app"]["caught_ms"] for _, o in v]))
        ser.append((mode + ": last GO", [n for n, _ in v], [o["cr"]["go_ms"] for _, o in v]))
    # No seed bound here; the floor of any rollback-recovery: detection plus
    # recomputing what the dead task had done since the checkpoint.
    floor = lambda v: [o["cr"]["detect_ms"] + o["app"]["target_steps"] * o["app"]["iter_ms"] for _, o in v]
    v = by_n["cr"]
    plot(os.path.join(HERE, "mlog.png"), "cr vs mlog-causal after one crash (64 MiB, 1 s lost)",
         "ms after the crash", ser, [("floor: detection + the lost steps' compute", [n for n, _ in v], floor(v))])
    ser = []
    for mode, v in by_mb.items():
        ser.append((mode + ": caught up", [m for m, _ in v], [o["app"]["caught_ms"] for _, o in v]))
        ser.append((mode + ": last GO", [m for m, _ in v], [o["cr"]["go_ms"] for _, o in v]))
    v = by_mb["cr"]
    plot(os.path.join(HERE, "mlog_state.png"), "cr vs mlog-causal after one crash, n = 1024",
         "ms after the crash", ser, [("floor: detection + the lost steps' compute", [m for m, _ in v], floor(v))],
         xlabel="state per node (MiB)")


if __name__ == "__main__":
    main()
