#!/usr/bin/env python3
"""usage: transports-summary.py OUT_DIR

Reads transports.sh's JSON records and prints, per carrier, the median (and
range) of: broadcast — server CPU per delivery (µs) and delivery p99 (ms);
idle — server RSS per idle connection (KiB) and Go heap per connection.
Every run's losses and duplicates are summed: they must be 0.
"""
import glob
import json
import os
import statistics
import sys


def med(xs):
    return "%.2f (%.2f–%.2f)" % (statistics.median(xs), min(xs), max(xs)) if xs else "-"


def main():
    out = sys.argv[1]
    rows = {}
    for f in sorted(glob.glob(os.path.join(out, "*.json"))):
        carrier, workload, _ = os.path.basename(f)[:-5].split("-")
        rec = json.load(open(f))
        d = rec["delivery"]
        srv = rec.get("server") or {}
        r = rows.setdefault(carrier, {"cpu": [], "p99": [], "kib": [], "heap": [], "bad": 0, "runs": 0})
        r["bad"] += d["lost"] + d["duplicated"]
        r["runs"] += 1
        if workload == "broadcast":
            if d["received"]:
                r["cpu"].append(srv.get("cpuSeconds", 0.0) / d["received"] * 1e6)
            r["p99"].append(rec["latency"]["p99Ms"])
        else:
            r["kib"].append(srv.get("perConnBytes", 0) / 1024)
            r["heap"].append(srv.get("heapPerConnBytes", 0) / 1024)
    print("| carrier | broadcast: server CPU per delivery (µs) | broadcast: delivery p99 (ms) | idle: RSS per connection (KiB) | idle: Go heap per connection (KiB) | runs | lost + duplicated |")
    print("|---|---|---|---|---|---|---|")
    for c in ("ws", "sse", "stream"):
        if c in rows:
            r = rows[c]
            print("| %s | %s | %s | %s | %s | %d | %d |" % (c, med(r["cpu"]), med(r["p99"]), med(r["kib"]), med(r["heap"]), r["runs"], r["bad"]))


if __name__ == "__main__":
    main()
