#!/usr/bin/python3
"""Training-step benchmark (issue 7): Fashion-MNIST epoch times of synk against PyTorch.

Runs the reference configuration (examples/fashion_mnist: MLP 784-256-256-10 ReLU f32, global
batch 256, momentum SGD lr 0.05 / 0.9) for --epochs epochs in each variant, and repeats the
whole set --rounds times, ALTERNATING the variants inside each round so that every variant sees
the same mix of machine load:

  synk-r1     fashion_mnist --ranks 1
  synk-r2     fashion_mnist --ranks 2
  synk-r2-y50 the same with SYNK_YIELD_US=50 (ranks sleep after 100 us of waiting: the wait
              policy before 2026-11-21's fourth session, for an A/B of the default 2 ms)
  synk-r1-det64 / synk-r2-det64  the same with --deterministic 64 (micro-shards of 64 rows and the
              exact all-reduce: the same bits on any number of ranks), for the cost of that mode
  synk-r1-prescott / synk-r2-prescott  the same with OPENBLAS_CORETYPE=Prescott: OpenBLAS 0.3.21's
              kernels on a CPU it does not know, as before synk corrected that choice
              (docs/runtime.md, "BLAS kernels"), for an A/B of the correction
  torch-t1    bench/train_torch.py, one process, torch.set_num_threads(1)
  torch-t2    bench/train_torch.py, one process, torch.set_num_threads(2)
  torch-ddp2  bench/train_torch.py, DistributedDataParallel over gloo, 2 processes x 1 thread

Before each run the machine is probed (bench/cpu_probe: the cache-line round trip between CPU 0
and 1, whose two states on a VM split results in two: docs/performance/collectives.md, "Fresh groups").
A run's figure is the median of its epochs' training times (validation excluded). The table
gives, per variant, the median and minimum over rounds and the 1-minute load average seen by
its runs, then the ratios synk / PyTorch and the 1 -> 2 rank speedups. Writes train_bench.csv
(one row per run) and train_bench.png (bar chart of the medians) into --out-dir.

  /usr/bin/python3 bench/train_bench.py --build-dir build --rounds 3 --epochs 2
(needs python3-torch: scripts/install-deps.sh --bench)
"""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from epoch_bench import (CSV_FIELDS, bench_env, chosen_variants, csv_row, row_from_csv, run_rounds, run_synk,  # noqa: E402
                         run_torch, variant_summary)


def variants(binary):
    return {
        "synk-r1": lambda e, env: run_synk(binary, 1, e, env, timeout=1200),
        "synk-r2": lambda e, env: run_synk(binary, 2, e, env, timeout=1200),
        "synk-r2-y50": lambda e, env: run_synk(binary, 2, e, env, extra_env={"SYNK_YIELD_US": "50"}, timeout=1200),
        "synk-r1-det64": lambda e, env: run_synk(binary, 1, e, env, ["--deterministic", "64"], timeout=1200),
        "synk-r2-det64": lambda e, env: run_synk(binary, 2, e, env, ["--deterministic", "64"], timeout=1200),
        "synk-r1-prescott": lambda e, env: run_synk(binary, 1, e, env, extra_env={"OPENBLAS_CORETYPE": "Prescott"},
                                                    timeout=1200),
        "synk-r2-prescott": lambda e, env: run_synk(binary, 2, e, env, extra_env={"OPENBLAS_CORETYPE": "Prescott"},
                                                    timeout=1200),
        "torch-t1": lambda e, env: run_torch("train_torch.py", ["--threads", "1"], e, env, timeout=3600),
        "torch-t2": lambda e, env: run_torch("train_torch.py", ["--threads", "2"], e, env, timeout=3600),
        "torch-ddp2": lambda e, env: run_torch("train_torch.py", ["--ddp", "2"], e, env, timeout=3600),
    }


def plot(path, names, medians, mins):
    from plotlib import pyplot
    plt = pyplot("train_bench.py", "--from-csv CSV")
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = ["tab:blue" if n.startswith("synk") else "tab:orange" for n in names]
    # torch with 2 intra-op threads can be 10x slower than the rest on a loaded 2-core machine:
    # clip such a bar so that the others stay readable, and say so on it.
    ordered = sorted(medians)
    top = 3 * ordered[-2] if len(ordered) > 1 and ordered[-1] > 4 * ordered[-2] else 1.15 * ordered[-1]
    bars = ax.bar(names, [min(m, top) for m in medians], color=colors)
    ax.scatter(names, [min(m, top) for m in mins], color="black", marker="_", s=400, label="best run", zorder=3)
    ax.axhline(0.55, color="tab:red", linestyle="--", linewidth=1, label="issue 7 target, 2 ranks (0.55 s)")
    ax.set_ylim(0, top * 1.08)
    for bar, value in zip(bars, medians):
        label = f"{value:.2f}" + (" (clipped)" if value > top else "")
        ax.annotate(label, (bar.get_x() + bar.get_width() / 2, min(value, top)), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("seconds per epoch (median of runs)")
    against = " vs PyTorch 1.13" if any(n.startswith("torch") for n in names) else ""
    ax.set_title(f"Fashion-MNIST MLP, batch 256: synk{against} (CPU)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default="build", help="the CMake build directory holding fashion_mnist")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--variants", default="synk-r1,synk-r2,torch-t1,torch-ddp2,torch-t2",
                        help="comma-separated subset, run in this order each round")
    parser.add_argument("--torch-t2-epochs", type=int, default=1,
                        help="epochs for torch-t2 (two intra-op threads can be 10x slower on a loaded 2-core box)")
    parser.add_argument("--out-dir", default=None, help="where the CSV and PNG go (default: the build directory)")
    parser.add_argument("--from-csv", default=None, help="summarise and plot an earlier run's CSV instead of running")
    args = parser.parse_args()
    if args.from_csv:
        with open(args.from_csv) as f:
            rows = [row_from_csv(r) for r in csv.DictReader(f)]
        chosen = list(dict.fromkeys(r["variant"] for r in rows))
        report(rows, chosen, os.path.dirname(os.path.abspath(args.from_csv)))
        return
    binary = os.path.join(args.build_dir, "examples", "fashion_mnist", "fashion_mnist")
    if not os.access(binary, os.X_OK):
        parser.error(f"no fashion_mnist binary at {binary} (build the fashion_mnist target first)")
    if args.rounds < 1 or args.epochs < 1:
        parser.error("--rounds and --epochs must be at least 1")
    table = variants(binary)
    chosen = chosen_variants(parser, args.variants, table)
    out_dir = args.out_dir or args.build_dir
    os.makedirs(out_dir, exist_ok=True)
    env = bench_env()

    def run_variant(name):
        return table[name](args.torch_t2_epochs if name == "torch-t2" else args.epochs, env)

    rows = run_rounds(args.rounds, chosen, run_variant, args.build_dir)

    report(rows, chosen, out_dir)


def report(rows, chosen, out_dir):
    """Writes the CSV, prints the table and ratios, draws the PNG."""
    csv_path = os.path.join(out_dir, "train_bench.csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for r in rows:
            w.writerow(csv_row(r))

    summary = {}
    print(f"\n{'variant':<12} {'median s/epoch':>15} {'best':>7} {'load avg (1 min)':>18}  probe before each run")
    for name in chosen:
        _, median, best, loads, probes = variant_summary(rows, name)
        summary[name] = (median, best)
        print(f"{name:<12} {summary[name][0]:15.3f} {summary[name][1]:7.3f} {min(loads):8.2f} - {max(loads):5.2f}  {probes}")

    def ratio(a, b, label):
        if a in summary and b in summary:
            print(f"{label:<34} {summary[a][0] / summary[b][0]:6.2f}")

    print()
    ratio("synk-r1", "torch-t1", "synk 1 rank / torch 1 thread")
    ratio("synk-r2", "torch-ddp2", "synk 2 ranks / torch DDP 2 procs")
    ratio("synk-r2", "torch-t2", "synk 2 ranks / torch 2 threads")
    ratio("synk-r1", "synk-r2", "synk speedup 1 -> 2 ranks")
    ratio("synk-r2-y50", "synk-r2", "synk 2 ranks: yield 50 us / 2 ms")
    ratio("torch-t1", "torch-ddp2", "torch speedup 1 -> DDP 2")
    ratio("synk-r1-det64", "synk-r1", "synk 1 rank: deterministic (64-row shards) / plain")
    ratio("synk-r2-det64", "synk-r2", "synk 2 ranks: deterministic (64-row shards) / plain")
    ratio("synk-r1-prescott", "synk-r1", "synk 1 rank: OpenBLAS Prescott kernels / corrected")
    ratio("synk-r2-prescott", "synk-r2", "synk 2 ranks: OpenBLAS Prescott kernels / corrected")
    png_path = os.path.join(out_dir, "train_bench.png")
    plot(png_path, chosen, [summary[n][0] for n in chosen], [summary[n][1] for n in chosen])
    print(f"\nwrote {csv_path} and {png_path}")


if __name__ == "__main__":
    main()
