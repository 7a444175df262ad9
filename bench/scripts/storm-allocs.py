#!/usr/bin/env python3
"""storm-allocs.py OUT: what the server allocated in storm-ab.sh's runs
(ALLOCS=1), from OUT/*.allocs (lines: unix time, bytes allocated, objects
allocated, GC cycles, upgrades accepted; read from /metrics every 0.5 s).

Per build (A, B): the herd's reconnect window, from the last reading before
1% of the 10,000 sockets were back (upgrades accepted) to the first reading,
once 99% were, whose allocation rate has fallen below twice the rate of the
3 s before the window (the resumes' replays run after the upgrades); and the
whole run (20,000 upgrades, the publishes, the herd)."""
import os
import statistics
import sys

N = 10000


def window(rows):
    j = next((i for i, r in enumerate(rows) if r[4] >= 2 * N - N // 100), None)
    if j is None:
        return None
    i = max(k for k in range(j) if rows[k][4] < N + N // 100)
    p = max((k for k in range(i) if rows[k][0] <= rows[i][0] - 3), default=0)
    steady = (rows[i][1] - rows[p][1]) / max(rows[i][0] - rows[p][0], 1e-9)
    e = next((k for k in range(j + 1, len(rows))
              if (rows[k][1] - rows[k - 1][1]) / (rows[k][0] - rows[k - 1][0]) < 2 * steady), len(rows) - 1)
    s, t = rows[i], rows[e]
    return [t[1] - s[1], t[2] - s[2], t[3] - s[3], t[0] - s[0]]


def main(d):
    for k in "AB":
        win, run = [], []
        for f in sorted(os.listdir(d)):
            if not (f.startswith(k + "-") and f.endswith(".allocs")):
                continue
            rows = [[float(x) for x in l.split()] for l in open(os.path.join(d, f)) if len(l.split()) == 5]
            if len(rows) < 2:
                continue
            w = window(rows)
            if w:
                win.append(w)
            run.append([rows[-1][n] - rows[0][n] for n in (1, 2, 3)])
        if win:
            print(k, "reconnect window: allocated median %.1f MB %s  objects median %.2f M %s  GC cycles %s  window %s s" % (
                statistics.median(x[0] for x in win) / 1e6, [round(x[0] / 1e6, 1) for x in win],
                statistics.median(x[1] for x in win) / 1e6, [round(x[1] / 1e6, 2) for x in win],
                [int(x[2]) for x in win], [round(x[3], 1) for x in win]))
        if run:
            print(k, "whole run: allocated median %.1f MB %s  objects median %.2f M %s  GC cycles %s" % (
                statistics.median(x[0] for x in run) / 1e6, [round(x[0] / 1e6, 1) for x in run],
                statistics.median(x[1] for x in run) / 1e6, [round(x[1] / 1e6, 2) for x in run],
                [int(x[2]) for x in run]))


main(sys.argv[1])
