#!/usr/bin/env python3
"""Draws collectives_bench CSVs: all_reduce algorithmic bandwidth against size, synk and OpenMPI,
one pair of lines per rank count. With several CSVs (repeated runs on a noisy machine) it plots the
median of the runs with min-max bars and, with --table, prints a markdown table of the medians
(each ratio is the median of the per-run ratios, every ratio measured within one run).

Usage: plot_collectives.py [--table] OUT.png RUN.csv [RUN.csv ...]"""
import csv
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(paths):
    """{(ranks, bytes): [row per run]}, bandwidth rows only (the latency row has bytes 4 and 0 GB/s)."""
    runs = defaultdict(list)
    for path in paths:
        for r in csv.DictReader(open(path)):
            runs[(int(r["ranks"]), int(r["bytes"]))].append(r)
    return runs


def human(size):
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB" if size >= 1024 else f"{size} B"


def main(argv):
    table = "--table" in argv
    argv = [a for a in argv if a != "--table"]
    png, paths = argv[0], argv[1:]
    runs = load(paths)
    fig, ax = plt.subplots(figsize=(8, 5))
    for n in sorted({k[0] for k in runs}):
        sizes = sorted(b for (m, b) in runs if m == n and float(runs[(m, b)][0]["synk_gbps"]) > 0)
        for key, style, label in (("synk_gbps", "o-", "synk all_reduce"), ("mpi_gbps", "s--", "OpenMPI MPI_Allreduce")):
            values = [[float(r[key]) for r in runs[(n, b)]] for b in sizes]
            if not any(v > 0 for vs in values for v in vs):
                continue
            med = [statistics.median(vs) for vs in values]
            err = [[m - min(vs) for m, vs in zip(med, values)], [max(vs) - m for m, vs in zip(med, values)]]
            ax.errorbar(sizes, med, yerr=err, fmt=style, capsize=3, label=f"{label}, {n} ranks")
        if table:
            print(f"\n{n} ranks ({len(paths)} runs: median [min, max])\n")
            print("| size | synk GB/s | OpenMPI GB/s | ratio |")
            print("| --- | --- | --- | --- |")
            for b in sizes:
                rows = runs[(n, b)]
                s = [float(r["synk_gbps"]) for r in rows]
                m = [float(r["mpi_gbps"]) for r in rows]
                q = [float(r["ratio"]) for r in rows if float(r["ratio"]) > 0]
                fmt = lambda v: f"{statistics.median(v):.2f} [{min(v):.2f}, {max(v):.2f}]" if v else "-"
                print(f"| {human(b)} | {fmt(s)} | {fmt(m)} | {'x' + fmt(q) if q else '-'} |")
            lat = runs.get((n, 4), [])
            if lat:
                s = [float(r["synk_seconds"]) * 1e6 for r in lat]
                m = [float(r["mpi_seconds"]) * 1e6 for r in lat]
                print(f"\none-float all_reduce, {n} ranks: synk {statistics.median(s):.2f} us "
                      f"[{min(s):.2f}, {max(s):.2f}], OpenMPI {statistics.median(m):.2f} us [{min(m):.2f}, {max(m):.2f}]")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes per rank (float32)")
    ax.set_ylabel("algorithmic bandwidth (GB/s)")
    ax.set_title(f"all_reduce (sum) over shared memory, {len(paths)} run(s): median, min-max")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


if __name__ == "__main__":
    main(sys.argv[1:])
