#!/usr/bin/python3
"""Draws runtime_bench's compute-bound scaling curve: speedup of the matmul function from 1 to N
ranks against the ideal line, from one or more CSVs (repeated runs: median with min-max bars).

Usage: plot_runtime.py OUT.png RUN.csv [RUN.csv ...]"""
import csv
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, paths = sys.argv[1], sys.argv[2:]
    speedups = defaultdict(list)
    for path in paths:
        for row in csv.DictReader(open(path)):
            if row["section"] == "matmul":
                speedups[int(row["ranks"])].append(float(row["baseline"]) / float(row["value"]))
    if not speedups:
        sys.exit(f"plot_runtime.py: no matmul rows in {', '.join(paths)}")
    ranks = sorted(speedups)
    med = [statistics.median(speedups[r]) for r in ranks]
    low = [m - min(speedups[r]) for r, m in zip(ranks, med)]
    high = [max(speedups[r]) - m for r, m in zip(ranks, med)]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(ranks, ranks, "--", color="gray", label="ideal")
    ax.errorbar(ranks, med, yerr=[low, high], marker="o", capsize=3, label="synk, matmul 8192x512 @ 512x512")
    ax.set_xlabel("ranks (processes, one per core)")
    ax.set_ylabel("speedup over 1 rank")
    ax.set_xticks(ranks)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    main()
