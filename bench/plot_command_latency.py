#!/usr/bin/python3
"""Draws command_latency's CSVs: per fresh group, the empty command, the barrier command and the
one-float all_reduce in probe round trips (left) and in microseconds against the probe (right),
one marker shape per CSV (e.g. the code before and after a change, labelled by file name).

Usage: plot_command_latency.py OUT.png RUN.csv [RUN.csv ...]"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLUMNS = [("command_us", "empty command"), ("barrier_us", "barrier command"), ("all_reduce_us", "one-float all_reduce"),
           ("broadcast_us", "one-float broadcast"), ("broadcast64_us", "64-byte broadcast")]
MARKERS = "os^vD"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, paths = sys.argv[1], sys.argv[2:]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for i, path in enumerate(paths):
        rows = list(csv.DictReader(open(path)))
        if not rows:
            sys.exit(f"plot_command_latency.py: no rows in {path}")
        label = os.path.splitext(os.path.basename(path))[0]
        for j, (column, name) in enumerate(COLUMNS):
            if column not in rows[0]:   # a CSV from before the column existed
                continue
            probe = [float(r["probe_ns"]) for r in rows]
            us = [float(r[column]) for r in rows]
            color = f"C{j}"
            marker = MARKERS[i % len(MARKERS)]
            left.plot(range(1, len(rows) + 1), [u * 1e3 / p if p > 0 else 0 for u, p in zip(us, probe)], marker=marker,
                      color=color, linestyle="-", alpha=0.8, label=f"{name} ({label})")
            right.scatter(probe, us, marker=marker, color=color, label=f"{name} ({label})")
    left.set_xlabel("fresh group")
    left.set_ylabel("probe round trips per call")
    right.set_xlabel("CPU 0 <-> 1 cache-line round trip before the group (ns)")
    right.set_ylabel("us per call")
    for ax in (left, right):
        ax.grid(alpha=0.3)
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
