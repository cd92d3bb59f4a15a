#!/usr/bin/python3
"""Draws collectives_bench CSVs: all_reduce algorithmic bandwidth against size, synk and OpenMPI,
one pair of lines per rank count. Every row is one fresh process group (collectives_bench
--groups) or one run (older CSVs); over all the rows of all the CSVs given it plots the median
with min-max bars, so a bimodal result shows as a long bar, and with --table prints a markdown
table of median [min, max] (each ratio is a synk group's against the OpenMPI launch beside it).

With --probe OUT.png (CSVs with the probe_ns column) it also draws each group's one-float
all_reduce time and 64 KiB bandwidth against the machine's CPU 0 <-> 1 cache-line round trip
measured after that group (bench/cpu_probe.h).

Usage: plot_collectives.py [--table] [--probe PROBE.png] OUT.png RUN.csv [RUN.csv ...]"""
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


def probe_plot(png, paths):
    rows = [r for p in paths for r in csv.DictReader(open(p)) if r.get("probe_ns")]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 4))
    lat = [r for r in rows if r["bytes"] == "4"]
    a.plot([float(r["probe_ns"]) for r in lat], [float(r["synk_seconds"]) * 1e6 for r in lat], "o")
    a.set_xlabel("CPU 0 <-> 1 cache-line round trip (ns)")
    a.set_ylabel("synk one-float all_reduce (us)")
    bw = [r for r in rows if r["bytes"] == "65536"]
    b.plot([float(r["probe_ns"]) for r in bw], [float(r["synk_gbps"]) for r in bw], "o")
    b.set_xlabel("CPU 0 <-> 1 cache-line round trip (ns)")
    b.set_ylabel("synk all_reduce 64 KiB (GB/s)")
    fig.suptitle(f"{len(lat)} fresh groups, 2 ranks: synk follows the machine's state")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main(argv):
    table = "--table" in argv
    argv = [a for a in argv if a != "--table"]
    if "--probe" in argv:
        i = argv.index("--probe")
        probe_png = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
        probe_plot(probe_png, argv[1:])
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
            count = max(len(runs[(n, b)]) for b in sizes)
            print(f"\n{n} ranks ({count} groups: median [min, max])\n")
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
    groups = max(len(v) for v in runs.values())
    ax.set_title(f"all_reduce (sum) over shared memory, {groups} fresh groups: median, min-max")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


if __name__ == "__main__":
    main(sys.argv[1:])
