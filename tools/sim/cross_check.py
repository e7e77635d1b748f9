#!/usr/bin/python3
"""Cross-check (issue 15): the simulator's message counts against the real
runtime's for the same workload at n = 8 and 16.

  hb:  SIGKILL of one rank of an idle job (apps/busy, PHX_FT=1), once every
       node logged `start`; the runtime's BCASTMSG count is the number of
       `bcast` events with dset [victim] in the JSON event logs (one per copy
       received), the simulator's is its BCASTMSG sends for one
       crash (no copy is ever sent to a rank known dead, so sent = received).
  td:  apps/tdk `ring HOPS` with `--work 500` (each hop to rank+1, 500 us of
       work) under each fault-free detector; the runtime's control messages
       are the upper-case counters of PHX_STATS=1, summed over nodes, and so
       are the simulator's (the same counters of the same state machines;
       --td-walk=ring --task-us=500).
ERA has no per-message counter in the runtime (core/agree.c), so it is not
cross-checked here. Usage: cross_check.py [--hb-only] [BINDIR] (default build/bin).
Exit 0 when the hb counts match (the td rows are reported, not judged: see
README.md), 1 otherwise, 77 when the binaries are missing."""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
HB_ONLY = "--hb-only" in sys.argv   # the ctest: the deterministic part only
BIN = ARGS[0] if ARGS else os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin")
for b in ("phx", "busy", "tdk", "phx-sim"):
    if not os.path.exists(os.path.join(BIN, b)):
        print("SKIP: %s/%s missing" % (BIN, b))
        sys.exit(77)
HB_MS = int(os.environ.get("PHX_HB_TIMEOUT", "1000"))


def sim(args):
    p = subprocess.run([os.path.join(BIN, "phx-sim")] + args, capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def wait_for(pred, timeout):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return True
        time.sleep(0.05)
    return False


def real_hb(n, victim):
    d = tempfile.mkdtemp(prefix="phxsim-xc-")
    env = dict(os.environ, PHX_FT="1", PHX_TD="none", PHX_EVENTLOG=d + "/ev.%r.jsonl",
               PHX_HB_TIMEOUT=str(HB_MS))
    # The kill resets the victim's sockets: its observer declares it after
    # delta/2 and the broadcast takes microseconds, so 2 delta + 2 s of job
    # (derived from the configured timeout) holds every copy.
    secs = 2 * HB_MS // 1000 + 2
    job = subprocess.Popen([os.path.join(BIN, "phx"), "run", "-n", str(n), "--pidfile", d + "/pids",
                            os.path.join(BIN, "busy"), str(secs), "10", "0"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def started():   # every node logged `start`: heartbeating runs everywhere
        fs = glob.glob(d + "/ev.*.jsonl")
        return len(fs) == n and all('"start"' in open(f).read() for f in fs) and os.path.exists(d + "/pids")
    if not wait_for(started, 60):
        job.kill()
        shutil.rmtree(d, ignore_errors=True)
        return None, "job did not start"
    pids = {}
    for line in open(d + "/pids"):
        m = re.match(r"\s*(\d+)\s+(\d+)", line)
        if m:
            pids[int(m.group(1))] = int(m.group(2))
    os.kill(pids[victim], signal.SIGKILL)
    job.wait(timeout=secs + 60)
    # Only copies of broadcasts about the victim alone count: a false
    # suspicion on a loaded host would start broadcasts the workload lacks.
    cnt, other = 0, 0
    for f in glob.glob(d + "/ev.*.jsonl"):
        for line in open(f):
            line = line.replace(" ", "")
            if '"ev":"bcast"' in line:
                if '"dset":[%d]' % victim in line:
                    cnt += 1
                else:
                    other += 1
    shutil.rmtree(d, ignore_errors=True)
    return cnt, "(other broadcasts: %d)" % other


def real_td(n, td, hops):
    env = dict(os.environ, PHX_TD=td, PHX_STATS="1", PHX_FT="0")
    p = subprocess.run([os.path.join(BIN, "phx"), "run", "-n", str(n), os.path.join(BIN, "tdk"),
                        "--work", "500", "ring", str(hops)], env=env, capture_output=True, text=True,
                       timeout=120)
    total = 0
    for m in re.finditer(r'"td_ctrl":\{([^}]*)\}', p.stderr):
        for k, v in re.findall(r'"([A-Za-z_]+)":(\d+)', m.group(1)):
            if k.isupper():
                total += int(v)
    return total


def main():
    rows, ok = [], True
    for n in (8, 16):
        victim = 3
        s = sim(["--n=%d" % n, "--host-size=%d" % n, "--crash=%d@3000" % victim, "--reset=1",
                 "--delta-ms=%d" % HB_MS, "--stop-early=1"])["hb"]["bcast"]
        r, note = real_hb(n, victim)
        rows.append(("hb BCASTMSG, kill rank %d" % victim, n, s, r, note))
        for td in () if HB_ONLY else ("cda", "hcda", "4c", "edod"):
            st = sim(["--n=%d" % n, "--hb=0", "--td=%s" % td, "--td-hops=200", "--td-walk=ring",
                      "--task-us=500"])["td_stats"]
            s = sum(v for k, v in st.items() if k.isupper())   # as the runtime's sum below
            rows.append(("td %s ctrl, tdk ring 200" % td, n, s, real_td(n, td, 200), ""))
    out = ["| workload | n | simulator | runtime | equal |", "|---|---|---|---|---|"]
    for w, n, s, r, note in rows:
        m = s == r
        ok &= m
        out.append("| %s | %d | %s | %s | %s %s |" % (w, n, s, r, "yes" if m else "no", note))
    text = "\n".join(out) + "\n"
    print(text)
    if not HB_ONLY:   # the full run feeds README.md (update_readme.py)
        os.makedirs(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"), exist_ok=True)
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "cross.md"), "w") as f:
            f.write(text)
    if not HB_ONLY:
        ok = all(r[2] == r[3] for r in rows if r[0].startswith("hb"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
