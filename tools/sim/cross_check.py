#!/usr/bin/python3
"""Cross-check: the simulator's message counts against the real
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
  era: xc_agree (tools/sim) runs K = 6 world agreements (MIN) on every node,
       failure-free, and with the leaf rank n - 1 SIGKILLed on learning the
       decision of agreement 2 (phx_agree_debug_die "decided"); the job ends
       by termination detection, so every ERA message is sent before exit.
       The runtime's count is core/agree.c's `era_stats` event (UP and
       DECIDE handed to the transport, summed over the survivors' logs: the
       killed node logs none), the simulator's its `era.survivors` for
       --era=6 and --crash-on=R:decided:3. Why this kill and no other: every
       message to the leaf (its parent's DECIDE of agreement 2) is sent
       before it dies, and from then on its parent must learn of the death
       before it can report, so the count does not depend on when the
       notice arrives. A kill right after a node's UP races the notice with
       the rest of that agreement (its parent skips the DECIDE to a rank it
       knows dead), and an inner node's children may send their next UP to
       it or not: those counts are timing-dependent.
Usage: cross_check.py [--exact] [BINDIR] (default build/bin).
--exact (the ctest): the deterministic rows only (hb and era).
Exit 0 when the hb and era counts match (the td rows are reported, not
judged: see README.md), 1 otherwise, 77 when the binaries are missing."""
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
EXACT = "--exact" in sys.argv   # the ctest: the deterministic part only
BIN = ARGS[0] if ARGS else os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin")
for b in ("phx", "busy", "tdk", "xc_agree", "phx-sim"):
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


def real_era(n, k, kill):
    """(UP, DECIDE) summed over the era_stats events of the job's logs."""
    d = tempfile.mkdtemp(prefix="phxsim-xe-")
    env = dict(os.environ, PHX_FT="1", PHX_EVENTLOG=d + "/ev.%r.jsonl", PHX_HB_TIMEOUT=str(HB_MS))
    args = [str(k)] + (["%d:%d" % kill] if kill else [])
    try:
        p = subprocess.run([os.path.join(BIN, "phx"), "run", "-n", str(n), os.path.join(BIN, "xc_agree")] + args,
                           env=env, capture_output=True, text=True, timeout=60 + 4 * HB_MS // 1000)
        up = dec = logs = 0
        for f in glob.glob(d + "/ev.*.jsonl"):
            for line in open(f):
                if '"era_stats"' in line:
                    o = json.loads(line)
                    up, dec, logs = up + o["up"], dec + o["decide"], logs + 1
        want = n - (1 if kill else 0)
        if p.returncode != 0 or logs != want:
            return "job rc %d, %d era_stats of %d" % (p.returncode, logs, want)
        return "%d / %d" % (up, dec)
    finally:
        shutil.rmtree(d, ignore_errors=True)


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
        k = 6
        for kill in (None, (n - 1, 2)):
            args = ["--n=%d" % n, "--host-size=%d" % n, "--era=%d" % k, "--era-at-ms=3000", "--reset=1",
                    "--delta-ms=%d" % HB_MS]
            if kill:
                args.append("--crash-on=%d:decided:%d" % (kill[0], kill[1] + 1))
            e = sim(args)["era"]["survivors"]
            what = "era UP / DECIDE, %d agreements" % k
            what += ", rank %d killed on deciding #%d" % kill if kill else ", failure-free"
            rows.append((what, n, "%d / %d" % (e["up"], e["decide"]), real_era(n, k, kill), ""))
        for td in () if EXACT else ("cda", "hcda", "4c", "edod"):
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
    if not EXACT:   # the full run feeds README.md (update_readme.py)
        os.makedirs(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"), exist_ok=True)
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "cross.md"), "w") as f:
            f.write(text)
    if not EXACT:
        ok = all(r[2] == r[3] for r in rows if r[0].startswith(("hb", "era")))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
