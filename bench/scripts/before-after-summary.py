#!/usr/bin/env python3
"""usage: before-after-summary.py OUT_DIR

Reads before-after.sh's JSON records and prints, per workload and binary,
the median (and range) of the server's CPU per delivery and of p99:
busy room, deliveries read and delivery p99;
broadcast, deliveries read and delivery p99; cursors, signal deliveries
and freshness p99; storm, server CPU from the RST until all resumed per
client, and RST-to-resumed p99.
"""
import glob
import json
import os
import statistics
import sys


def figures(w, rec):
    cpu = (rec.get("server") or {}).get("cpuSeconds", 0.0)
    d = rec["delivery"]
    bad = d["lost"] + d["duplicated"]
    if w == "busy":
        return cpu / d["received"] * 1e6, rec["latency"]["p99Ms"], bad
    if w == "broadcast":
        return cpu / d["received"] * 1e6, rec["latency"]["p99Ms"], bad
    if w == "cursors":
        f = rec["freshness"]
        return cpu / f["deliveries"] * 1e6, f["latency"]["p99Ms"], bad
    s = rec["storm"]
    return cpu / s["clients"] * 1e6, s["recovery"]["p99Ms"], bad


def main():
    out = sys.argv[1]
    unit = {"busy": "us/delivery", "broadcast": "us/delivery", "cursors": "us/signal delivery",
            "storm": "us/resumed client"}
    for w in ("busy", "broadcast", "cursors", "storm"):
        for b in ("old", "new"):
            rows = []
            for p in sorted(glob.glob(os.path.join(out, f"{b}-{w}-*.json"))):
                with open(p) as fh:
                    rows.append(figures(w, json.load(fh)))
            if not rows:
                continue
            cpu = [r[0] for r in rows]
            p99 = [r[1] for r in rows]
            print(f"{w:9} {b}: n={len(rows)} CPU {statistics.median(cpu):.2f} "
                  f"[{min(cpu):.2f}-{max(cpu):.2f}] {unit[w]}, p99 "
                  f"{statistics.median(p99):.1f} [{min(p99):.1f}-{max(p99):.1f}] ms, "
                  f"lost+dup {sum(r[2] for r in rows)}")


if __name__ == "__main__":
    main()
