#!/usr/bin/python3
"""CNN benchmark (issue 17): Fashion-MNIST epoch times of synk's examples/fashion_cnn against
PyTorch 1.13 on the same model (bench/cnn_torch.py), on the CPU.

Runs each variant for --epochs epochs and repeats the whole set --rounds times, ALTERNATING the
variants inside each round so that every variant sees the same mix of machine load:

  synk-r1     fashion_cnn --ranks 1
  synk-r2     fashion_cnn --ranks 2
  torch-t1    cnn_torch.py, one process, 1 thread
  torch-t2    cnn_torch.py, one process, 2 threads
  torch-ddp2  cnn_torch.py, DistributedDataParallel over gloo, 2 processes x 1 thread

Both sides train on the same 55,000 images (5,000 held out) unless --limit N trains on N only (for
a quick check that the script works). A run's figure is the median of its epochs' training times.
The table gives, per variant, the median and minimum over rounds and the 1-minute load averages
seen, then synk 2 ranks / PyTorch's best 2-core configuration (issue 17's target: at most 0.6)
and the 1 -> 2 rank speedup (target: at least 1.85). Writes cnn_bench.csv (one row per run) and
cnn_bench.png (bar chart of the medians) into --out-dir.

  /usr/bin/python3 bench/cnn_bench.py --build-dir build --rounds 2 --epochs 2
  /usr/bin/python3 bench/cnn_bench.py --build-dir build --rounds 1 --epochs 1 --limit 2000   # smoke
"""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from epoch_bench import (CSV_FIELDS, bench_env, chosen_variants, csv_row, run_rounds, run_synk, run_torch,  # noqa: E402
                         variant_summary)


def variants(binary, limit, batch):
    # cnn_torch.py's recipe (momentum SGD lr 0.05, constant rate) at the same global batch, not
    # fashion_cnn's defaults (nesterov lr 0.1, warm-up and cosine), so both sides do the same work.
    synk_args = ["--batch", str(batch), "--optimizer", "momentum", "--lr", "0.05", "--momentum", "0.9", "--no-cosine",
                 "--warmup", "0"] + (["--limit", str(limit)] if limit else [])
    torch_args = ["--limit", str(limit), "--batch", str(batch)]
    return {
        "synk-r1": lambda e, env: run_synk(binary, 1, e, env, synk_args),
        "synk-r2": lambda e, env: run_synk(binary, 2, e, env, synk_args),
        "torch-t1": lambda e, env: run_torch("cnn_torch.py", torch_args + ["--threads", "1"], e, env),
        "torch-t2": lambda e, env: run_torch("cnn_torch.py", torch_args + ["--threads", "2"], e, env),
        "torch-ddp2": lambda e, env: run_torch("cnn_torch.py", torch_args + ["--ddp", "2"], e, env),
    }


def plot(path, names, medians, mins, batch):
    from plotlib import pyplot
    plt = pyplot("cnn_bench.py")
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = ["tab:blue" if n.startswith("synk") else "tab:orange" for n in names]
    bars = ax.bar(names, medians, color=colors)
    ax.scatter(names, mins, color="black", marker="_", s=400, label="best run", zorder=3)
    for bar, value in zip(bars, medians):
        ax.annotate(f"{value:.2f}", (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("seconds per epoch (median of runs)")
    ax.set_title(f"Fashion-MNIST CNN (examples/fashion_cnn), batch {batch}: synk vs PyTorch 1.13 (CPU)")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def report(rows, chosen, out_dir, batch):
    """Writes the CSV, prints the table and ratios, draws the PNG."""
    csv_path = os.path.join(out_dir, "cnn_bench.csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for r in rows:
            w.writerow(csv_row(r))
    summary = {}
    print(f"\n{'variant':<12} {'median s/epoch':>15} {'best':>8} {'test acc':>9} {'load avg (1 min)':>18}  "
          "probe before each run")
    for name in chosen:
        mine, median, best, loads, probes = variant_summary(rows, name)
        summary[name] = (median, best)
        print(f"{name:<12} {summary[name][0]:15.3f} {summary[name][1]:8.3f} {100 * mine[-1]['accuracy']:8.2f}% "
              f"{min(loads):8.2f} - {max(loads):5.2f}  {probes}")
    print()
    torch2 = [n for n in ("torch-t2", "torch-ddp2") if n in summary]
    if "synk-r2" in summary and torch2:
        best = min(torch2, key=lambda n: summary[n][0])
        print(f"{'synk 2 ranks / torch best 2-core (' + best + ')':<44} {summary['synk-r2'][0] / summary[best][0]:6.2f}"
              "   (target <= 0.6)")
    if "synk-r1" in summary and "torch-t1" in summary:
        print(f"{'synk 1 rank / torch 1 thread':<44} {summary['synk-r1'][0] / summary['torch-t1'][0]:6.2f}")
    if "synk-r1" in summary and "synk-r2" in summary:
        print(f"{'synk speedup 1 -> 2 ranks':<44} {summary['synk-r1'][0] / summary['synk-r2'][0]:6.2f}"
              "   (target >= 1.85)")
    png_path = os.path.join(out_dir, "cnn_bench.png")
    plot(png_path, chosen, [summary[n][0] for n in chosen], [summary[n][1] for n in chosen], batch)
    print(f"\nwrote {csv_path} and {png_path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default="build", help="the CMake build directory holding fashion_cnn")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="train on N images only (0: all 55,000)")
    parser.add_argument("--batch", type=int, default=256, help="global batch of both sides (fashion_cnn's default: 128)")
    parser.add_argument("--variants", default="synk-r1,synk-r2,torch-t1,torch-t2,torch-ddp2",
                        help="comma-separated subset, run in this order each round")
    parser.add_argument("--out-dir", default=None, help="where the CSV and PNG go (default: the build directory)")
    args = parser.parse_args()
    binary = os.path.join(args.build_dir, "examples", "fashion_cnn", "fashion_cnn")
    if not os.access(binary, os.X_OK):
        parser.error(f"no fashion_cnn binary at {binary} (build the fashion_cnn target first)")
    if args.rounds < 1 or args.epochs < 1 or args.limit < 0 or args.batch < 1:
        parser.error("--rounds, --epochs and --batch must be at least 1, --limit at least 0")
    table = variants(binary, args.limit, args.batch)
    chosen = chosen_variants(parser, args.variants, table)
    out_dir = args.out_dir or args.build_dir
    os.makedirs(out_dir, exist_ok=True)
    env = bench_env()
    rows = run_rounds(args.rounds, chosen, lambda name: table[name](args.epochs, env), args.build_dir)
    report(rows, chosen, out_dir, args.batch)


if __name__ == "__main__":
    main()
