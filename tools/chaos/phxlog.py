"""Readers shared by phx-chaos and phx-chaos-check (Python 3 stdlib only).

Formats (see README.md):
  pidfile    one "rank pid host" line per node, written by `phx run --pidfile`.
  event log  JSON lines, each with "t" (CLOCK_REALTIME ns), "rank" (writer), "ev".
  kill log   JSON lines {"t":ns,"ev":"kill","rank":R,"pid":P,"signal":"SIGKILL"}.
"""

import glob
import json
import os
from collections import namedtuple

Proc = namedtuple("Proc", "rank pid host")

# Loopback names only: a pid on any other host is the pid of the local ssh.
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "::1"}


def is_local_host(host):
    return host in _LOCAL_NAMES or host.startswith("127.")


def read_pidfile(path):
    """Return [Proc] sorted by rank; raise ValueError("path:line: why")."""
    procs = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            words = line.split()
            if not words:
                continue
            where = "%s:%d" % (path, n)
            if len(words) != 3:
                raise ValueError("%s: expected 'rank pid host', got %r" % (where, line.strip()))
            try:
                rank, pid = int(words[0]), int(words[1])
            except ValueError:
                raise ValueError("%s: rank and pid must be integers: %r" % (where, line.strip()))
            if rank < 0:
                raise ValueError("%s: negative rank %d" % (where, rank))
            if pid <= 1:  # 0, -1 and 1 would signal a group, everything, or init
                raise ValueError("%s: refusing pid %d" % (where, pid))
            if rank in procs:
                raise ValueError("%s: rank %d listed twice" % (where, rank))
            procs[rank] = Proc(rank, pid, words[2])
    if not procs:
        raise ValueError("%s: empty pidfile" % path)
    return [procs[r] for r in sorted(procs)]


# ---- JSON lines ------------------------------------------------------------

def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_int_list(v):
    return isinstance(v, list) and all(_is_int(x) for x in v)


# Required fields of the known event types; other types are ignored by callers.
_FIELDS = {
    "start": {"size": _is_int, "ring": _is_int_list},
    "suspect": {"dead": _is_int},
    "notice": {"dead": _is_int, "via": lambda v: isinstance(v, str)},
    "bcast": {"origin": _is_int, "seq": _is_int, "dset": _is_int_list},
    "ring": {"emitter": _is_int, "observer": _is_int},
    "fenced": {},
    "exit": {"code": _is_int},
    "kill": {"pid": _is_int, "signal": lambda v: isinstance(v, str)},
}


def parse_line(line):
    """Parse one JSON line into a dict; raise ValueError(reason) if malformed."""
    try:
        ev = json.loads(line)
    except ValueError as e:
        raise ValueError("not JSON (%s)" % e)
    if not isinstance(ev, dict):
        raise ValueError("not a JSON object")
    for key, ok in (("t", _is_int), ("rank", _is_int), ("ev", lambda v: isinstance(v, str))):
        if key not in ev or not ok(ev[key]):
            raise ValueError("missing or invalid %r" % key)
    for key, ok in _FIELDS.get(ev["ev"], {}).items():
        if key not in ev or not ok(ev[key]):
            raise ValueError("%r event: missing or invalid %r" % (ev["ev"], key))
    return ev


def read_jsonl(path, warn):
    """Yield the well-formed events of a file; call warn("path:line: why") for the others."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield parse_line(line)
            except ValueError as e:
                warn("%s:%d: %s" % (path, n, e))


def expand(pattern, ranks=None):
    """Files named by an event-log pattern.

    With ranks given and %r in the pattern: one path per rank (existing or not).
    Otherwise %r matches anything and the pattern is a glob; sorted existing files.
    """
    if "%r" in pattern and ranks is not None:
        return [pattern.replace("%r", str(r)) for r in ranks]
    return sorted(set(glob.glob(pattern.replace("%r", "*"))))


class Tail:
    """Follows growing JSON-lines files; poll() returns the events of new complete lines."""

    def __init__(self, paths, warn):
        self.warn = warn
        self.state = {p: [0, 0, b""] for p in paths}  # path -> [offset, lineno, partial]

    def poll(self):
        out = []
        for path, st in self.state.items():
            try:
                with open(path, "rb") as f:
                    f.seek(st[0])
                    data = f.read()
            except OSError:
                continue  # not created yet
            st[0] += len(data)
            lines = (st[2] + data).split(b"\n")
            st[2] = lines.pop()  # incomplete last line, kept for the next poll
            for raw in lines:
                st[1] += 1
                if not raw.strip():
                    continue
                try:
                    out.append(parse_line(raw.decode("utf-8", "replace")))
                except ValueError as e:
                    self.warn("%s:%d: %s" % (path, st[1], e))
        return out


def pid_start_time(pid):
    """Wall-clock start time (seconds) of a process, or None if unknown (non-Linux)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/stat") as f:
            btime = next(int(l.split()[1]) for l in f if l.startswith("btime "))
        return btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def pid_state(pid):
    """'alive', 'zombie' or 'gone'."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "gone"
    except PermissionError:
        return "alive"
    try:
        with open("/proc/%d/stat" % pid) as f:
            if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return "zombie"
    except (OSError, IndexError):
        pass
    return "alive"
