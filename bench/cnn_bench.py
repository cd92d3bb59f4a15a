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
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EPOCH_LINE = re.compile(r"^epoch\s+(\d+)\s+train\s+([0-9.]+) s")
ACCURACY_LINE = re.compile(r"test accuracy ([0-9.]+)%")


def run_synk(binary, ranks, epochs, limit, env):
    cmd = [binary, "--ranks", str(ranks), "--epochs", str(epochs), "--out", ""]
    if limit:
        cmd += ["--limit", str(limit)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=7200)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    times = [float(m.group(2)) for m in map(EPOCH_LINE.match, done.stdout.splitlines()) if m]
    if len(times) != epochs:
        raise RuntimeError(f"{' '.join(cmd)}: expected {epochs} epoch lines, found {len(times)}")
    accuracy = ACCURACY_LINE.search(done.stdout)
    return times, float(accuracy.group(1)) / 100 if accuracy else float("nan")


def run_torch(args_list, epochs, limit, env):
    cmd = [sys.executable, os.path.join(HERE, "cnn_torch.py"), "--epochs", str(epochs), "--limit", str(limit)] + args_list
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=7200)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    times = [r["seconds"] for r in records if "epoch" in r]
    if len(times) != epochs:
        raise RuntimeError(f"{' '.join(cmd)}: expected {epochs} epochs, found {len(times)}")
    summary = [r for r in records if r.get("summary")]
    return times, summary[0]["test_accuracy"] if summary else float("nan")


def variants(binary, limit):
    return {
        "synk-r1": lambda e, env: run_synk(binary, 1, e, limit, env),
        "synk-r2": lambda e, env: run_synk(binary, 2, e, limit, env),
        "torch-t1": lambda e, env: run_torch(["--threads", "1"], e, limit, env),
        "torch-t2": lambda e, env: run_torch(["--threads", "2"], e, limit, env),
        "torch-ddp2": lambda e, env: run_torch(["--ddp", "2"], e, limit, env),
    }


def plot(path, names, medians, mins):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = ["tab:blue" if n.startswith("synk") else "tab:orange" for n in names]
    bars = ax.bar(names, medians, color=colors)
    ax.scatter(names, mins, color="black", marker="_", s=400, label="best run", zorder=3)
    for bar, value in zip(bars, medians):
        ax.annotate(f"{value:.2f}", (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("seconds per epoch (median of runs)")
    ax.set_title("Fashion-MNIST CNN (examples/fashion_cnn), batch 256: synk vs PyTorch 1.13 (CPU)")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def report(rows, chosen, out_dir):
    """Writes the CSV, prints the table and ratios, draws the PNG."""
    csv_path = os.path.join(out_dir, "cnn_bench.csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "variant", "median_epoch_s", "epoch_times_s", "test_accuracy", "load1_before",
                    "load1_after"])
        for rnd, name, times, median, accuracy, lb, la in rows:
            w.writerow([rnd, name, f"{median:.4f}", " ".join(f"{t:.4f}" for t in times), f"{accuracy:.4f}",
                        f"{lb:.2f}", f"{la:.2f}"])
    summary = {}
    print(f"\n{'variant':<12} {'median s/epoch':>15} {'best':>8} {'test acc':>9} {'load avg (1 min)':>18}")
    for name in chosen:
        mine = [r for r in rows if r[1] == name]
        meds = [r[3] for r in mine]
        loads = [x for r in mine for x in (r[5], r[6])]
        summary[name] = (statistics.median(meds), min(meds))
        print(f"{name:<12} {summary[name][0]:15.3f} {summary[name][1]:8.3f} {100 * mine[-1][4]:8.2f}% "
              f"{min(loads):8.2f} - {max(loads):5.2f}")
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
    plot(png_path, chosen, [summary[n][0] for n in chosen], [summary[n][1] for n in chosen])
    print(f"\nwrote {csv_path} and {png_path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default="build", help="the CMake build directory holding fashion_cnn")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="train on N images only (0: all 55,000)")
    parser.add_argument("--variants", default="synk-r1,synk-r2,torch-t1,torch-t2,torch-ddp2",
                        help="comma-separated subset, run in this order each round")
    parser.add_argument("--out-dir", default=None, help="where the CSV and PNG go (default: the build directory)")
    args = parser.parse_args()
    binary = os.path.join(args.build_dir, "examples", "fashion_cnn", "fashion_cnn")
    if not os.access(binary, os.X_OK):
        parser.error(f"no fashion_cnn binary at {binary} (build the fashion_cnn target first)")
    if args.rounds < 1 or args.epochs < 1 or args.limit < 0:
        parser.error("--rounds and --epochs must be at least 1, --limit at least 0")
    table = variants(binary, args.limit)
    chosen = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in table]
    if unknown:
        parser.error(f"unknown variants {unknown} (known: {', '.join(table)})")
    out_dir = args.out_dir or args.build_dir
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ)
    env.pop("SYNK_PROFILE", None)
    rows = []   # (round, variant, epoch times, median, test accuracy, load before, load after)
    for rnd in range(1, args.rounds + 1):
        for name in chosen:
            load_before = os.getloadavg()[0]
            start = time.time()
            times, accuracy = table[name](args.epochs, env)
            load_after = os.getloadavg()[0]
            median = statistics.median(times)
            rows.append((rnd, name, times, median, accuracy, load_before, load_after))
            print(f"round {rnd}  {name:<12} {median:7.3f} s/epoch  (epochs {', '.join(f'{t:.3f}' for t in times)}; "
                  f"test acc {100 * accuracy:.2f}%; load {load_before:.2f} -> {load_after:.2f}; "
                  f"{time.time() - start:.0f} s)", flush=True)
    report(rows, chosen, out_dir)


if __name__ == "__main__":
    main()
