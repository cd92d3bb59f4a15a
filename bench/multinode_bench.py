#!/usr/bin/python3
"""The multi-node benchmark (docs/multinode.md): synk across "nodes" on localhost (OpenMPI's TCP
transport over lo between them, so no byte crosses a node through shared memory) against plain
MPI in the same runs.

For 2 nodes x 1 rank the baseline is MPI_Allreduce between the same two leader processes, in the
same launch (multinode_bench). For 2 nodes x 2 ranks it is MPI_Allreduce over 4 MPI processes
(collectives_mpi, launched just before). The empty call is compared with an MPI_Barrier round
trip between the leaders, and get_value of a rank on the last node with an MPI_Bcast of 16 bytes
from that node. Each layout runs in several fresh launches (new processes, new
segments); the table shows the spread of the ratio over launches (min / median / max), the CSV
every launch, the PNG every launch as a point.

    bench/multinode_bench.py [--build build] [--launches 4] [--max-bytes N] [--layouts 2x1,2x2] [--csv F] [--png F]
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys

TCP = ["--allow-run-as-root", "--oversubscribe", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
       "--mca", "oob_tcp_if_include", "lo"]


def launch(args, nodes):
    out = subprocess.run(["mpirun", *TCP, "-np", str(nodes), *args], check=True, capture_output=True, text=True,
                         timeout=900).stdout
    return out.splitlines()


def synk_launch(build, nodes, ranks, max_bytes, reps):
    sizes, call, get = {}, None, None
    for line in launch([f"{build}/bench/multinode_bench", str(ranks), str(max_bytes), str(reps)], nodes):
        f = line.split()
        if f[0] == "allreduce":
            sizes[int(f[1])] = (float(f[2]), float(f[3]))
        elif f[0] == "call":
            call = (float(f[1]), float(f[2]))
        elif f[0] == "get_value":
            get = (float(f[1]), float(f[2]))
    return sizes, call, get


def mpi_launch(build, procs, max_bytes, reps):
    sizes = {}
    for line in launch([f"{build}/bench/collectives_mpi", "1024", str(max_bytes), str(reps)], procs):
        f = line.split()
        if f[0] != "latency":
            sizes[int(f[0])] = float(f[1])
    return sizes


def human(n):
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if n < 1024:
            return f"{n} {unit}"
        n //= 1024
    return f"{n} TiB"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--launches", type=int, default=4)
    p.add_argument("--max-bytes", type=int, default=256 << 20)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--layouts", default="2x1,2x2", help="NODESxRANKS, comma-separated")
    p.add_argument("--csv", default="bench/multinode_bench.csv")
    p.add_argument("--png", default="bench/multinode_bench.png")
    a = p.parse_args()
    print(f"multinode_bench: all_reduce float32 sum over TCP loopback; load average at start "
          f"{os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs, {a.launches} fresh launches per layout")
    rows = []
    layouts = [tuple(int(x) for x in layout.split("x")) for layout in a.layouts.split(",")]
    for nodes, ranks in layouts:
        ratios, calls, gets = {}, [], []
        for k in range(a.launches):
            sizes, call, get = synk_launch(a.build, nodes, ranks, a.max_bytes, a.reps)
            baseline = mpi_launch(a.build, nodes * ranks, a.max_bytes, a.reps) if ranks > 1 else None
            for b, (s, mpi_same) in sorted(sizes.items()):
                mpi = baseline[b] if baseline else mpi_same
                ratios.setdefault(b, []).append(mpi / s)
                rows.append(dict(layout=f"{nodes}x{ranks}", launch=k, op="all_reduce", bytes=b, synk_s=s, mpi_s=mpi,
                                 synk_gbps=b / s / 1e9, mpi_gbps=b / mpi / 1e9, ratio=mpi / s))
            calls.append(call)
            rows.append(dict(layout=f"{nodes}x{ranks}", launch=k, op="empty call", bytes=0, synk_s=call[0],
                             mpi_s=call[1], synk_gbps=0, mpi_gbps=0, ratio=call[1] / call[0]))
            gets.append(get)
            rows.append(dict(layout=f"{nodes}x{ranks}", launch=k, op="get_value", bytes=16, synk_s=get[0],
                             mpi_s=get[1], synk_gbps=0, mpi_gbps=0, ratio=get[1] / get[0]))
        base = f"MPI_Allreduce, same {nodes} processes" if ranks == 1 else f"MPI_Allreduce over {nodes * ranks} processes"
        print(f"\n{nodes} nodes x {ranks} rank{'s' if ranks > 1 else ''} (baseline: {base})")
        print(f"{'size':>10} {'synk GB/s (median)':>20} {'x MPI: min':>11} {'median':>7} {'max':>6}")
        for b, r in sorted(ratios.items()):
            gbps = statistics.median(row["synk_gbps"] for row in rows
                                     if row["layout"] == f"{nodes}x{ranks}" and row["op"] == "all_reduce"
                                     and row["bytes"] == b)
            print(f"{human(b):>10} {gbps:20.3f} {min(r):11.2f} {statistics.median(r):7.2f} {max(r):6.2f}")
        over = [c[0] / c[1] for c in calls]
        print(f"empty call: {statistics.median(c[0] for c in calls) * 1e6:.1f} us, MPI_Barrier "
              f"{statistics.median(c[1] for c in calls) * 1e6:.1f} us: x{min(over):.2f} / {statistics.median(over):.2f}"
              f" / {max(over):.2f} of a barrier (min / median / max over launches)")
        over = [g[0] / g[1] for g in gets]
        print(f"get_value of the last rank, 16 bytes: {statistics.median(g[0] for g in gets) * 1e6:.1f} us, "
              f"MPI_Bcast from its node {statistics.median(g[1] for g in gets) * 1e6:.1f} us: x{min(over):.2f} / "
              f"{statistics.median(over):.2f} / {max(over):.2f} of the broadcast")
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    print(f"\nload average at end {os.getloadavg()[0]:.2f}; CSV: {a.csv}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return 0
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for (nodes, ranks), colour in zip(layouts, ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]):
        layout = f"{nodes}x{ranks}"
        pts = [r for r in rows if r["layout"] == layout and r["op"] == "all_reduce"]
        ax.scatter([r["bytes"] for r in pts], [r["ratio"] for r in pts], s=14, color=colour,
                   label=f"{layout}: synk / plain MPI bandwidth, each launch")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes per all_reduce")
    ax.set_ylabel("synk bandwidth / MPI bandwidth")
    ax.set_title("all_reduce across nodes (TCP loopback), fresh launches")
    ax.legend()
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)
    print(f"plot: {a.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
