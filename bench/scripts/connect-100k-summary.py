#!/usr/bin/env python3
"""Summarise a connect-100k.sh run: the connect generators' histograms merged
into one connect-to-joined distribution over every held connection, their
delivery checks summed, and the broadcast's latency and losses.

usage: connect-100k-summary.py OUT   (the directory connect-100k.sh wrote)
"""
import glob
import json
import os
import sys


def quantile(buckets, total, q):
    # The upper edge of the bucket holding the q-th connection: the merged
    # figure is as fine as corral-bench's histogram, never finer.
    want = q * total
    seen = 0
    for b in buckets:
        seen += b["count"]
        if seen >= want:
            return b["hiMs"]
    return float("nan")


def main(out):
    merged = {}
    joined = failed = target = lost = dup = 0
    per_edge = []
    for path in sorted(glob.glob(os.path.join(out, "connect-*.json"))):
        with open(path) as f:
            r = json.load(f)
        c = r.get("connect") or {}
        joined += c.get("joined", 0)
        failed += c.get("failed", 0)
        target += c.get("target", 0)
        d = r.get("delivery", {})
        lost += d.get("lost", 0)
        dup += d.get("duplicated", 0)
        for b in r.get("histogram") or []:
            k = (b["loMs"], b["hiMs"])
            merged[k] = merged.get(k, 0) + b["count"]
        lat = c.get("latency", {})
        srv = r.get("server") or {}
        per_edge.append("  %s: joined %d/%d, p50 %.1f p95 %.1f p99 %.1f ms, edge %.1f CPU-s, %.1f KiB/conn"
                        % (os.path.basename(path), c.get("joined", 0), c.get("target", 0),
                           lat.get("p50Ms", 0), lat.get("p95Ms", 0), lat.get("p99Ms", 0),
                           srv.get("cpuSeconds", 0), srv.get("perConnBytes", 0) / 1024))
    buckets = [{"loMs": k[0], "hiMs": k[1], "count": v} for k, v in sorted(merged.items())]
    total = sum(b["count"] for b in buckets)
    print("connect: %d of %d joined, %d failed; merged connect-to-joined (bucket upper edges) "
          "p50 %.1f ms, p95 %.1f ms, p99 %.1f ms; probes lost %d, duplicated %d"
          % (joined, target, failed, quantile(buckets, total, .50), quantile(buckets, total, .95),
             quantile(buckets, total, .99), lost, dup))
    print("\n".join(per_edge))
    bpath = os.path.join(out, "broadcast.json")
    if os.path.exists(bpath):
        with open(bpath) as f:
            r = json.load(f)
        lat, d, srv = r.get("latency", {}), r.get("delivery", {}), r.get("server") or {}
        print("broadcast: %s" % r.get("headline", ""))
        print("broadcast: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms; lost %d, duplicated %d; edge 0 %.1f CPU-s"
              % (lat.get("p50Ms", 0), lat.get("p95Ms", 0), lat.get("p99Ms", 0),
                 d.get("lost", 0), d.get("duplicated", 0), srv.get("cpuSeconds", 0)))
    else:
        print("broadcast: no record")


if __name__ == "__main__":
    main(sys.argv[1])
