#!/usr/bin/env python3
"""Draws collectives_bench's CSV: all_reduce algorithmic bandwidth against size, synk and OpenMPI,
one line pair per rank count. Usage: plot_collectives.py RESULTS.csv OUT.png"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(csv_path: str, png_path: str) -> None:
    rows = [r for r in csv.DictReader(open(csv_path)) if float(r["synk_gbps"]) > 0]
    fig, ax = plt.subplots(figsize=(8, 5))
    for n in sorted({int(r["ranks"]) for r in rows}):
        mine = [r for r in rows if int(r["ranks"]) == n]
        sizes = [int(r["bytes"]) for r in mine]
        ax.plot(sizes, [float(r["synk_gbps"]) for r in mine], "o-", label=f"synk all_reduce, {n} ranks")
        if any(float(r["mpi_gbps"]) > 0 for r in mine):
            ax.plot(sizes, [float(r["mpi_gbps"]) for r in mine], "s--", label=f"OpenMPI MPI_Allreduce, {n} ranks")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes per rank (float32)")
    ax.set_ylabel("algorithmic bandwidth (GB/s)")
    ax.set_title("all_reduce (sum), shared memory")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
