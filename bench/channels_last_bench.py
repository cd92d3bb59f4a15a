#!/usr/bin/python3
"""The channels-last benchmark (docs/performance/models.md, "Channels last"): ResNet-20 on
Fashion-MNIST (fashion_resnet20, batch 128) with the CPU plans' NHWC convolutions against
SYNK_CONV_LAYOUT=nchw, on 1 and 2 ranks, and PyTorch's two 2-core configurations
(bench/resnet_torch.py: 2 threads, DDP over 2 processes), alternating in each round. Every run
is a fresh process group; the figure is the second epoch's training time. Prints each round's
ratios (nhwc / nchw, synk 2 ranks / PyTorch's best, 1 -> 2 ranks), writes every run to a CSV and
draws every round as points (PNG).

    bench/channels_last_bench.py [--build build] [--rounds 3] [--limit 6144] [--csv F] [--png F]
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def synk_epoch(build, layout, ranks, limit):
    env = dict(os.environ, SYNK_CONV_LAYOUT=layout)
    out = subprocess.run([f"{build}/examples/resnet/fashion_resnet20", "--ranks", str(ranks), "--epochs", "2",
                          "--limit", str(limit), "--holdout", "1024", "--out", ""],
                         env=env, check=True, capture_output=True, text=True, timeout=1800).stdout
    m = re.search(r"epoch  2  train +([0-9.]+) s", out)
    if not m:
        sys.exit(f"channels_last_bench: no second epoch in fashion_resnet20's output:\n{out}")
    return float(m.group(1))


def torch_epoch(mode, limit):
    args = ["--threads", "2"] if mode == "torch_threads2" else ["--ddp", "2"]
    out = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "resnet_torch.py"), *args, "--epochs", "2",
                          "--limit", str(limit), "--holdout", "1024", "--batch", "128"],
                         check=True, capture_output=True, text=True, timeout=1800).stdout
    for line in out.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            if d.get("epoch") == 2:
                return float(d["seconds"])
    sys.exit(f"channels_last_bench: no second epoch in resnet_torch.py's output:\n{out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=6144)
    ap.add_argument("--csv", default=os.path.join(HERE, "channels_last_bench.csv"))
    ap.add_argument("--png", default=os.path.join(HERE, "channels_last_bench.png"))
    a = ap.parse_args()
    runs = []
    with open("/proc/loadavg") as f:
        print(f"channels_last_bench: load average at start {f.read().split()[0]}, {a.rounds} rounds, "
              f"second-epoch seconds of {a.limit - 1024} training images, batch 128")
    for r in range(1, a.rounds + 1):
        t = {}
        for layout in ("nhwc", "nchw"):
            for ranks in (1, 2):
                t[f"synk_{layout}_{ranks}"] = synk_epoch(a.build, layout, ranks, a.limit)
        for mode in ("torch_threads2", "torch_ddp2"):
            t[mode] = torch_epoch(mode, a.limit)
        best = min(t["torch_threads2"], t["torch_ddp2"])
        print(f"round {r}: " + ", ".join(f"{k} {v:.2f} s" for k, v in t.items()))
        print(f"  nhwc/nchw: 2 ranks {t['synk_nhwc_2'] / t['synk_nchw_2']:.2f}, 1 rank "
              f"{t['synk_nhwc_1'] / t['synk_nchw_1']:.2f}; synk 2 ranks / PyTorch's best: nhwc "
              f"{t['synk_nhwc_2'] / best:.2f}, nchw {t['synk_nchw_2'] / best:.2f}; 1 -> 2 ranks (nhwc) "
              f"{t['synk_nhwc_1'] / t['synk_nhwc_2']:.2f}")
        runs += [{"round": r, "config": k, "seconds": v} for k, v in t.items()]
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["round", "config", "seconds"])
        w.writeheader()
        w.writerows(runs)
    from plotlib import pyplot
    plt = pyplot("channels_last_bench.py")
    configs = list(dict.fromkeys(x["config"] for x in runs))
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, c in enumerate(configs):
        ys = [x["seconds"] for x in runs if x["config"] == c]
        ax.scatter([i] * len(ys), ys)
    ax.set_xticks(range(len(configs)), configs, rotation=20)
    ax.set_ylabel("second epoch, s")
    ax.set_title("ResNet-20 on Fashion-MNIST, batch 128: NHWC vs NCHW convolutions, PyTorch 1.13")
    fig.tight_layout()
    fig.savefig(a.png, dpi=100)
    print(f"CSV: {a.csv}\nplot: {a.png}")


if __name__ == "__main__":
    main()
