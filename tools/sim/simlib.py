"""Shared helpers of the tools/sim experiment scripts: run phx-sim (results
cached in tools/sim/results/, keyed by the argument list, so tables and
plots can be regenerated without re-running), write a markdown table, and
draw cost against n on log axes beside a bound."""
import hashlib
import json
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")

# The network every experiment uses unless it says otherwise: 10 us +
# uniform 0..10 us per message, FIFO links, 2 us CPU per received message.
NET = ["--lat-us=10", "--jitter-us=10", "--dist=uniform", "--fifo=1", "--cost-us=2"]
TAU_US = 10 + 10 + 2          # worst message delay tau, for the seed's bounds
DELTA_MS = 1000               # suspicion timeout delta (runtime default)


def sim_path():
    for p in (os.environ.get("PHX_SIM"),
              os.path.join(HERE, "..", "..", "build", "bin", "phx-sim")):
        if p and os.path.exists(p):
            return p
    sys.exit("phx-sim not found: build it (cmake --build build --target phx-sim) or set PHX_SIM")


def run(args, check=False):
    """Runs phx-sim with args (list of strings); returns (json, seconds)."""
    os.makedirs(RESULTS, exist_ok=True)
    key = hashlib.sha1(" ".join(args).encode()).hexdigest()[:16]
    path = os.path.join(RESULTS, key + ".json")
    if os.path.exists(path):
        with open(path) as f:
            d = json.load(f)
        return d["out"], d["wall_s"]
    t0 = time.time()
    cmd = [sim_path()] + args + (["--check"] if check else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode not in (0, 1) or not p.stdout.strip():
        sys.exit("phx-sim failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr))
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["check_rc"] = p.returncode
    with open(path, "w") as f:
        json.dump({"args": args, "out": out, "wall_s": wall}, f)
    print("%6.1fs  %s" % (wall, " ".join(args)), file=sys.stderr)
    return out, wall


def table(path, header, rows):
    """Writes a markdown table to path and prints it."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        lines.append("| " + " | ".join(str(x) for x in r) + " |")
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    print(text)


def plot(path, title, ylabel, series, bounds=(), logy=True, xlabel="n (simulated nodes)"):
    """series/bounds: list of (label, xs, ys). Bounds are dashed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (label, xs, ys) in enumerate(series):
        ax.plot(xs, ys, "o-", label=label, color="C%d" % i)
    for i, (label, xs, ys) in enumerate(bounds):
        ax.plot(xs, ys, "--", label=label, color="C%d" % i, alpha=0.7)
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def log2(n):
    return int(math.floor(math.log2(n)))


def t_bound_ms(f, n, tau_us=TAU_US, delta_ms=DELTA_MS):
    """"Fault tolerant algorithms for a fault tolerant MPI" (Herault): T(f) <= f(f+1) delta + f tau + f(f+1)/2 B(n), B(n) = 8 tau log2 n,
    valid for f <= floor(log2 n) - 1."""
    tau = tau_us / 1000.0
    return f * (f + 1) * delta_ms + f * tau + f * (f + 1) / 2 * 8 * tau * math.log2(n)
