#!/usr/bin/python3
"""Overlap of the gradient all-reduce with the backward pass (TrainStep::set_overlap), measured.

Runs examples/resnet's resnet_demo (synthetic images, momentum-free SGD as the seeds' demo) once per
configuration and round, each run a fresh process group: the one all_reduce after the gradient call
(`off`, the baseline) and overlap with each bucket size given. The order of the configurations
rotates from round to round, so drift of the host hits every configuration alike. The figure is
the training time of the last epoch (the first one warms caches and allocators up); each overlap
run is divided by the `off` run of the same round. Prints every ratio (min, median, max: a bimodal
host shows as two clusters), writes a CSV and draws a PNG.

  bench/overlap_bench.py --build build --rounds 5 --depth 20 --image-size 32 --train 2048

With --nodes K (K > 1) every run is `mpirun -np K` on this host with OpenMPI's TCP transport over
lo between the "nodes" (docs/multinode.md), --ranks ranks on each.

  bench/overlap_bench.py --nodes 2 --ranks 1 --depth 20 --buckets 65536,1048576
"""
import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import time


def run_once(args, overlap, bucket):
    cmd = [os.path.join(args.build, "examples/resnet/resnet_demo"), "--depth", str(args.depth),
           "--image-size", str(args.image_size), "--classes", str(args.classes), "--train", str(args.train),
           "--valid", "64", "--test", "64", "--batch", str(args.batch), "--epochs", str(args.epochs),
           "--ranks", str(args.ranks), "--profile"]
    if overlap:
        cmd += ["--overlap", "--bucket-bytes", str(bucket)]
    if args.nodes > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(args.nodes), "--mca", "btl", "tcp,self",
               "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"] + cmd
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    epochs = re.findall(r"^epoch \d+: train loss ([0-9.]+), ([0-9.]+) s", out, re.M)
    steps = re.findall(r"per step: gradient ([0-9.]+) s, all-reduce ([0-9.]+) s, update ([0-9.]+) s", out)
    if not epochs or not steps:
        sys.exit(f"overlap_bench: unexpected output of {' '.join(cmd)}:\n{out}")
    loss, seconds = epochs[-1]
    gradient, allreduce, update = (float(v) for v in steps[-1])
    return float(seconds), float(loss), gradient, allreduce, update


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--depth", type=int, default=20)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--train", type=int, default=2048)
    p.add_argument("--batch", type=int, default=64, help="images per rank per step")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--ranks", type=int, default=2, help="ranks (per node with --nodes)")
    p.add_argument("--nodes", type=int, default=1, help="> 1: under mpirun on this host, TCP between the nodes")
    p.add_argument("--buckets", default="262144,1048576,4194304", help="bucket sizes in bytes, comma-separated")
    p.add_argument("--csv", default="bench/overlap_bench.csv")
    p.add_argument("--png", default="bench/overlap_bench.png")
    args = p.parse_args()

    configs = [("off", False, 0)] + [(f"overlap {int(b) >> 10} KiB", True, int(b)) for b in args.buckets.split(",")]
    rows = []
    start = time.strftime("%Y-%m-%d %H:%M:%S")
    load = os.getloadavg()[0]
    print(f"ResNet-{args.depth}, {args.image_size}x{args.image_size}, {args.train} images, {args.batch} per rank, "
          f"{args.ranks} ranks{f' on each of {args.nodes} nodes' if args.nodes > 1 else ''}; {args.rounds} rounds; "
          f"start {start}, load {load:.2f}")
    for r in range(args.rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        times = {}
        for name, overlap, bucket in order:
            seconds, loss, gradient, allreduce, update = run_once(args, overlap, bucket)
            times[name] = seconds
            rows.append({"round": r + 1, "config": name, "bucket_bytes": bucket, "epoch_s": seconds, "loss": loss,
                         "gradient_s": gradient, "allreduce_s": allreduce, "update_s": update})
        for row in rows[-len(configs):]:
            row["ratio_to_off"] = row["epoch_s"] / times["off"]
        print(f"round {r + 1}: " + ", ".join(f"{n} {times[n]:.2f} s" for n, _, _ in configs))
        sys.stdout.flush()
    print(f"end {time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.2f}")
    for name, _, _ in configs:
        mine = [row for row in rows if row["config"] == name]
        ratios = sorted(row["ratio_to_off"] for row in mine)
        losses = {row["loss"] for row in mine}
        print(f"{name:>16}: epoch {statistics.median(row['epoch_s'] for row in mine):.2f} s median; per step "
              f"gradient {statistics.median(row['gradient_s'] for row in mine) * 1e3:.1f} ms, all-reduce "
              f"{statistics.median(row['allreduce_s'] for row in mine) * 1e3:.1f} ms; ratio to off: min "
              f"{ratios[0]:.3f}, median {statistics.median(ratios):.3f}, max {ratios[-1]:.3f} "
              f"({' '.join(f'{x:.3f}' for x in ratios)}); last-epoch losses {sorted(losses)}")
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("overlap_bench: matplotlib missing, no PNG")
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (name, _, _) in enumerate(configs):
        ys = [row["ratio_to_off"] for row in rows if row["config"] == name]
        ax.scatter([i] * len(ys), ys, alpha=0.7)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(range(len(configs)), [c[0] for c in configs])
    ax.set_ylabel("epoch time / same round's off")
    where = f"{args.nodes} nodes x {args.ranks} ranks" if args.nodes > 1 else f"{args.ranks} ranks"
    ax.set_title(f"ResNet-{args.depth} on {where}: overlap vs one all-reduce ({args.rounds} fresh groups)")
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"wrote {args.csv} and {args.png}")


if __name__ == "__main__":
    main()
