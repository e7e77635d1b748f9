#!/usr/bin/python3
"""Copies the experiments' tables (results/NAME.md) into README.md between
<!-- table:NAME --> and <!-- end -->, and builds the scale table (largest
run of each kind: events, wall time on this machine, memory per node) from
the cached runs in results/*.json."""
import glob
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))


def scale_table():
    best = {}
    for p in glob.glob(os.path.join(HERE, "results", "*.json")):
        d = json.load(open(p))
        o, args = d["out"], d["args"]
        if "app" in o:
            kind = "mlog-causal (cr round + SCML + app)" if o["app"]["mlog"] else "cr + stencil app"
        elif "cr" in o:
            kind = "cr (hb + recovery)"
        elif "td" in o:
            kind = "td " + o["td"]["name"]
        elif "bcast_only" in o:
            kind = "bcast.c only"
        elif "era" in o:
            kind = "era" + (" + hb" if "hb" in o else "")
        else:
            kind = ("hb, %d crashed" % o["crashed"] if o["crashed"] <= 1 else
                    "hb, n/2 crashed" if 2 * o["crashed"] >= o["n"] else "hb, f > 1")
        if kind not in best or (o["n"], d["wall_s"]) > (best[kind][0]["n"], best[kind][1]):
            best[kind] = (o, d["wall_s"], args)
    rows = ["| driver | largest n | events | wall s (2 loaded cores) | KiB per node |",
            "|---|---|---|---|---|"]
    for kind in sorted(best):
        o, w, _ = best[kind]
        rows.append("| %s | %d | %d | %.1f | %.1f |" % (kind, o["n"], o["events"], w,
                                                       o["rss_per_node_bytes"] / 1024))
    return "\n".join(rows) + "\n"


def main():
    path = os.path.join(HERE, "README.md")
    text = open(path).read()

    def sub(m):
        name = m.group(1)
        if name == "scale":
            body = scale_table()
        else:
            f = os.path.join(HERE, "results", name + ".md")
            body = open(f).read() if os.path.exists(f) else "(not run yet)\n"
        return "<!-- table:%s -->\n%s<!-- end -->" % (name, body)
    text = re.sub(r"<!-- table:(\w+) -->\n.*?<!-- end -->", sub, text, flags=re.S)
    open(path, "w").write(text)


if __name__ == "__main__":
    main()
