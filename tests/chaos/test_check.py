"""Unit tests of tools/chaos/phx-chaos-check (and phxlog) on synthetic event logs.

Run from the repo root:  python3 -m unittest tests/chaos/test_check.py
                     or  python3 tests/chaos/test_check.py
"""

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "chaos")
CHECK = os.path.join(TOOLS, "phx-chaos-check")
sys.path.insert(0, TOOLS)
import phxlog  # noqa: E402


def load_check():
    loader = importlib.machinery.SourceFileLoader("phx_chaos_check", CHECK)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


chk = load_check()
T0 = 1_700_000_000_000_000_000  # kill time (ns)
MS = 1_000_000


class Job:
    """Builds synthetic event logs and a kill log in a temporary directory."""

    def __init__(self, tmp, size=4, ring=None):
        self.tmp, self.size = tmp, size
        self.ev = {r: [] for r in range(size)}
        self.kills = []
        ring = ring or list(range(size))
        for r in range(size):
            self.add(r, -1000, "start", size=size, ring=ring)

    def add(self, rank, t_ms, ev, **kw):
        self.ev.setdefault(rank, []).append(dict(t=T0 + int(t_ms * MS), rank=rank, ev=ev, **kw))

    def notice(self, rank, dead, t_ms, via="bcast"):
        self.add(rank, t_ms, "notice", dead=dead, via=via)

    def kill(self, rank, t_ms=0, sig="SIGKILL"):
        self.kills.append({"t": T0 + int(t_ms * MS), "ev": "kill", "rank": rank, "pid": 1000 + rank,
                           "signal": sig})

    def write(self, raw=None):
        """Write the logs; raw maps rank -> extra raw lines appended to that log."""
        for r, evs in self.ev.items():
            with open(self.path(r), "w") as f:
                f.writelines(json.dumps(e) + "\n" for e in evs)
                f.writelines((raw or {}).get(r, []))
        with open(self.killlog, "w") as f:
            f.writelines(json.dumps(k) + "\n" for k in self.kills)

    def path(self, r):
        return os.path.join(self.tmp, "ev.%d.jsonl" % r)

    @property
    def pattern(self):
        return os.path.join(self.tmp, "ev.%r.jsonl")

    @property
    def killlog(self):
        return os.path.join(self.tmp, "kills.jsonl")

    def analyse(self, raw=None, **kw):
        self.write(raw)
        self.warnings = []
        by_rank = chk.load_events(phxlog.expand(self.pattern), self.warnings.append)
        kills = chk.load_kills([self.killlog], self.warnings.append)
        return chk.analyse(by_rank, kills, **kw)

    def cli(self, *args, raw=None):
        self.write(raw)
        p = subprocess.run([sys.executable, CHECK, "-e", self.pattern, "-k", self.killlog] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                           timeout=30)
        return p.returncode, p.stdout, p.stderr


class CheckTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.job = Job(self._tmp.name)

    def tearDown(self):
        self._tmp.cleanup()

    def one_failure(self):
        """Rank 2 killed at 0; rank 1 (its observer) suspects at 30 ms; notices 31/40/45 ms."""
        j = self.job
        j.kill(2)
        j.add(1, 30, "suspect", dead=2)
        j.notice(1, 2, 31, "local")
        j.add(1, 31.5, "ring", emitter=3, observer=0)
        j.add(0, 39, "bcast", origin=1, seq=1, dset=[2])
        j.notice(0, 2, 40)
        j.notice(3, 2, 45.25)
        return j

    # ---- agreement and latency ----------------------------------------------------

    def test_agreement_and_latencies(self):
        s = self.one_failure().analyse()
        self.assertTrue(s["ok"], s["problems"])
        self.assertTrue(s["agreement"])
        self.assertEqual(s["final_dead_set"], [2])
        self.assertEqual(s["survivors"], [0, 1, 3])
        f = s["failures"][0]
        self.assertEqual((f["rank"], f["kill_t"], f["signal"]), (2, T0, "SIGKILL"))
        self.assertEqual(f["first_suspect"], {"by": 1, "t": T0 + 30 * MS, "latency_ms": 30.0})
        self.assertEqual({r: n["latency_ms"] for r, n in f["notices"].items()},
                         {"0": 40.0, "1": 31.0, "3": 45.25})
        self.assertEqual(f["notices"]["1"]["via"], "local")
        self.assertEqual(f["last"], {"rank": 3, "latency_ms": 45.25, "complete": True})

    def test_latency_uses_first_kill_and_first_notice(self):
        j = self.one_failure()
        j.kill(2, t_ms=10)          # a second, later kill of the same rank is ignored
        j.notice(3, 2, 60)          # a duplicate, later notice is ignored
        f = j.analyse()["failures"][0]
        self.assertEqual(f["notices"]["3"]["latency_ms"], 45.25)

    def test_events_out_of_order_in_file(self):
        j = self.one_failure()
        j.ev[3].insert(0, j.ev[3].pop())  # notice written before start
        self.assertEqual(j.analyse()["failures"][0]["notices"]["3"]["latency_ms"], 45.25)

    def test_two_failures(self):
        j = self.one_failure()
        j.kill(3, t_ms=100)
        j.notice(0, 3, 150)
        j.notice(1, 3, 130, "local")
        s = j.analyse()
        self.assertTrue(s["ok"], s["problems"])
        self.assertEqual(s["survivors"], [0, 1])
        self.assertEqual(s["final_dead_set"], [2, 3])
        self.assertEqual(s["failures"][1]["last"]["latency_ms"], 50.0)

    # ---- failures of the detector -------------------------------------------------------

    def test_missing_notice(self):
        j = self.one_failure()
        j.ev[3] = [e for e in j.ev[3] if e["ev"] != "notice"]
        s = j.analyse()
        self.assertFalse(s["ok"])
        f = s["failures"][0]
        self.assertEqual(f["missing"], [3])
        self.assertFalse(f["last"]["complete"])
        self.assertIn("survivor 3 never noticed killed rank 2", s["problems"])
        self.assertFalse(s["agreement"])  # {2} vs {}

    def test_disagreement_extra_rank(self):
        j = self.one_failure()
        j.notice(3, 1, 50)  # 3 also declares 1 dead, nobody else does; 1 was never killed
        s = j.analyse()
        self.assertFalse(s["agreement"])
        self.assertEqual(s["dead_sets"], {"0": [2], "1": [2], "3": [1, 2]})
        self.assertEqual(s["extra"], {"3": [1]})
        self.assertTrue(any("not killed" in p for p in s["problems"]))
        self.assertTrue(any("disagree" in p for p in s["problems"]))
        s = j.analyse(allow_extra=True)
        self.assertFalse(s["ok"])  # still a disagreement
        self.assertFalse(any("not killed" in p for p in s["problems"]))

    def test_extra_agreed_needs_allow_extra(self):
        j = self.one_failure()
        for r in (0, 1):
            j.notice(r, 3, 50)
        j.add(3, 55, "fenced")  # falsely suspected: agreed, but not killed
        self.assertTrue(j.analyse()["agreement"])
        self.assertEqual(j.analyse()["extra"], {"0": [3], "1": [3]})
        self.assertFalse(j.analyse()["ok"])
        self.assertTrue(j.analyse(allow_extra=True)["ok"])

    def test_fenced_rank_is_not_a_survivor(self):
        j = self.one_failure()
        j.notice(0, 3, 50)
        j.notice(1, 3, 50)
        j.add(3, 55, "fenced")
        j.add(3, 56, "exit", code=75)
        s = j.analyse(allow_extra=True)
        self.assertEqual(s["fenced"], [3])
        self.assertEqual(s["survivors"], [0, 1])
        self.assertTrue(s["ok"], s["problems"])
        self.assertEqual(s["exit_codes"], {"3": 75})
        self.assertEqual(s["final_dead_set"], [2, 3])

    def test_stop_is_a_failure_cont_is_not(self):
        j = self.one_failure()
        j.kills[0]["signal"] = "SIGSTOP"
        j.kill(1, 500, "SIGCONT")
        s = j.analyse()
        self.assertEqual(s["killed"], [2])
        self.assertEqual(s["failures"][0]["signal"], "SIGSTOP")
        self.assertTrue(s["ok"], s["problems"])

    def test_survivor_without_log(self):
        j = self.one_failure()
        j.add(0, -1000, "start", size=5, ring=[0, 1, 2, 3, 4])  # rank 4 never wrote anything
        for e in j.ev[0]:
            if e["ev"] == "start":
                e["size"] = 5
                break
        for r in (1, 2, 3):
            j.ev[r][0]["size"] = 5
        s = j.analyse()
        self.assertIn(4, s["survivors"])
        self.assertEqual(s["no_log"], [4])
        self.assertEqual(s["failures"][0]["missing"], [4])
        self.assertFalse(s["ok"])

    def test_noticed_before_kill(self):
        j = self.one_failure()
        j.ev[0][-1]["t"] = T0 - 5 * MS
        s = j.analyse()
        self.assertEqual(s["failures"][0]["notices"]["0"]["latency_ms"], -5.0)
        self.assertTrue(any("before it was signalled" in p for p in s["problems"]))

    def test_no_survivors(self):
        j = Job(self.job.tmp, size=2)
        j.kill(0)
        j.kill(1)
        s = j.analyse()
        self.assertIn("no survivors", s["problems"])

    # ---- expectations -------------------------------------------------------------------------

    def test_expect_dead(self):
        j = self.one_failure()
        s = j.analyse(expect_dead=[2])
        self.assertTrue(s["ok"], s["problems"])
        s = j.analyse(expect_dead=[1])  # 1 expected dead (e.g. killed by other means), not noticed
        self.assertFalse(s["ok"])
        self.assertEqual(s["expected_dead"], [1, 2])
        self.assertIn("survivor 0 never noticed expected dead rank 1", s["problems"])
        for r in (0, 3):
            j.notice(r, 1, 70)
        s = j.analyse(expect_dead=[1])
        self.assertEqual(s["survivors"], [0, 3])  # an expected-dead rank is not a survivor
        self.assertTrue(s["ok"], s["problems"])
        self.assertIsNone(s["failures"][0]["notices"]["0"]["latency_ms"])  # no kill time

    def test_max_latency(self):
        j = self.one_failure()
        self.assertTrue(j.analyse(max_latency_ms=45.25)["ok"])
        s = j.analyse(max_latency_ms=42)
        self.assertEqual(s["problems"], ["survivor 3 noticed rank 2 after 45.250 ms > 42 ms"])

    def test_bound(self):
        s = self.one_failure().analyse(bound_ms=40)
        self.assertTrue(s["ok"])  # --bound-ms only reports
        n = s["failures"][0]["notices"]
        self.assertEqual({r: x["within_bound"] for r, x in n.items()},
                         {"0": True, "1": True, "3": False})
        self.assertIn("OVER", chk.render(s))

    # ---- malformed input ----------------------------------------------------------------------------

    def test_malformed_lines_reported_and_skipped(self):
        j = self.one_failure()
        raw = {0: ['not json\n', '[1,2]\n', '{"rank":0,"ev":"notice","dead":3,"via":"x"}\n',
                   '{"t":"12","rank":0,"ev":"exit","code":0}\n',
                   '{"t":1,"rank":true,"ev":"exit","code":0}\n',
                   '{"t":1,"rank":0,"ev":"notice","via":"bcast"}\n',
                   '{"t":1,"rank":0,"ev":"start","size":4,"ring":"0,1"}\n', '\n',
                   '{"t":1,"rank":0,"ev":"notice","dead":3,"via":"bc']}  # truncated last line
        s = j.analyse(raw=raw)
        self.assertEqual(len(j.warnings), 8, j.warnings)
        first = len(j.ev[0]) + 1
        self.assertTrue(j.warnings[0].startswith("%s:%d: not JSON" % (j.path(0), first)), j.warnings[0])
        self.assertTrue(j.warnings[-1].startswith("%s:%d:" % (j.path(0), first + 8)))
        self.assertTrue(s["ok"], s["problems"])  # the good lines still count
        self.assertEqual(s["dead_sets"]["0"], [2])

    def test_unknown_events_ignored(self):
        j = self.one_failure()
        j.add(0, 10, "from-the-future", dead=3, whatever=[1])
        j.add(3, 11, "suspect2", dead=0)
        s = j.analyse()
        self.assertEqual(j.warnings, [])
        self.assertTrue(s["ok"], s["problems"])

    def test_malformed_kill_log(self):
        j = self.one_failure()
        j.write()
        with open(j.killlog, "a") as f:
            f.write('{"t":5,"ev":"kill","rank":3}\n')  # no pid / signal
        warnings = []
        kills = chk.load_kills([j.killlog], warnings.append)
        self.assertEqual([k["rank"] for k in kills], [2])
        self.assertEqual(len(warnings), 1)
        self.assertIn("kills.jsonl:2:", warnings[0])

    # ---- command line -----------------------------------------------------------------------------------

    def test_cli_ok_table_and_json(self):
        j = self.one_failure()
        rc, out, err = j.cli("--bound-ms", "50")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("RESULT: OK", out)
        self.assertIn("first suspect: rank 1, 30.000 ms", out)
        self.assertIn("45.250", out)
        self.assertIn("agreement: all 3 survivors have dead set {2}", out)
        rc, out, err = j.cli("--json")
        self.assertEqual(rc, 0)
        s = json.loads(out)
        self.assertEqual(s["final_dead_set"], [2])
        self.assertEqual(s["malformed_lines"], 0)

    def test_cli_failures_exit_1(self):
        j = self.one_failure()
        self.assertEqual(j.cli("--max-latency-ms", "10")[0], 1)
        rc, out, _ = j.cli("--expect-dead", "1,2")
        self.assertEqual(rc, 1)
        self.assertIn("MISSING", out)
        j.notice(3, 1, 50)
        rc, out, _ = j.cli("--allow-extra")
        self.assertEqual(rc, 1)
        self.assertIn("DISAGREEMENT", out)

    def test_cli_malformed_reported_with_file_line(self):
        j = self.one_failure()
        rc, out, err = j.cli(raw={3: ["garbage\n"]})
        self.assertEqual(rc, 0)
        self.assertIn("ev.3.jsonl:%d:" % (len(j.ev[3]) + 1), err)
        self.assertIn("1 malformed line(s) skipped", out)

    def test_cli_glob_and_usage_errors(self):
        j = self.one_failure()
        j.write()
        glob_pat = os.path.join(j.tmp, "ev.*.jsonl")
        p = subprocess.run([sys.executable, CHECK, "-e", glob_pat, "-k", j.killlog],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(p.returncode, 0)
        p = subprocess.run([sys.executable, CHECK, "-e", os.path.join(j.tmp, "nothing.%r")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(p.returncode, 2)
        p = subprocess.run([sys.executable, CHECK, "--help"], stdout=subprocess.PIPE, timeout=30)
        self.assertEqual(p.returncode, 0)
        self.assertIn(b"--expect-dead", p.stdout)


class PhxlogTest(unittest.TestCase):
    def test_local_hosts(self):
        for h in ("127.0.0.1", "127.1.2.3", "localhost", "::1"):
            self.assertTrue(phxlog.is_local_host(h), h)
        for h in ("node7", "10.0.0.1", "128.0.0.1", "localhostx", "1127.0.0.1"):
            self.assertFalse(phxlog.is_local_host(h), h)

    def test_pidfile(self):
        with tempfile.NamedTemporaryFile("w", suffix=".pids", delete=False) as f:
            f.write("1 200 127.0.0.1\n\n0 100 localhost\n")
        try:
            self.assertEqual(phxlog.read_pidfile(f.name),
                             [phxlog.Proc(0, 100, "localhost"), phxlog.Proc(1, 200, "127.0.0.1")])
            for bad in ("0 100\n", "0 x h\n", "0 1 h\n", "0 -1 h\n", "0 5 h\n0 6 h\n", ""):
                with open(f.name, "w") as g:
                    g.write(bad)
                with self.assertRaises(ValueError, msg=bad):
                    phxlog.read_pidfile(f.name)
        finally:
            os.unlink(f.name)

    def test_tail_waits_for_complete_lines(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "ev.0.jsonl")
            warnings = []
            tail = phxlog.Tail([p, os.path.join(d, "missing")], warnings.append)
            self.assertEqual(tail.poll(), [])
            with open(p, "w") as f:
                f.write('{"t":1,"rank":0,"ev":"suspect","dead":1}\n{"t":2,"rank":0,"ev":"no')
            self.assertEqual([e["t"] for e in tail.poll()], [1])
            with open(p, "a") as f:
                f.write('tice","dead":1,"via":"local"}\nbad\n')
            self.assertEqual([e["ev"] for e in tail.poll()], ["notice"])
            self.assertEqual(warnings, ["%s:3: not JSON (Expecting value: line 1 column 1 (char 0))" % p])

    def test_expand(self):
        self.assertEqual(phxlog.expand("/x/ev.%r.log", [0, 2]), ["/x/ev.0.log", "/x/ev.2.log"])
        with tempfile.TemporaryDirectory() as d:
            for r in (0, 1, 10):
                open(os.path.join(d, "ev.%d.log" % r), "w").close()
            self.assertEqual(len(phxlog.expand(os.path.join(d, "ev.%r.log"))), 3)


if __name__ == "__main__":
    unittest.main()
