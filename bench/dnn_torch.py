#!/usr/bin/python3
"""PyTorch side of synk's DNN benchmark (dnn_bench.cpp runs it between its own rounds).

Mode 1 (default): read the layer spec that dnn_bench writes (one layer a line, see
dnn_bench.cpp), time each op on ONE thread exactly as PyTorch's autograd runs it on CPU
(aten.convolution_backward, aten.native_batch_norm[_backward],
aten.max_pool2d_with_indices[_backward]), and print "layer,op,best_ms,median_ms" lines.
Mode 2 (--plot CSV PNG): draw dnn_bench's CSV as a bar chart of time relative to PyTorch.

Must run with /usr/bin/python3 (the interpreter that has torch 1.13 and matplotlib).
"""
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def timed(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return min(samples), statistics.median(samples)


def conv_ops(torch, f):
    n, c, h, w, o, kh, kw, sh, sw, pt, pb, pl, pr, dh, dw, groups, bias = map(int, f)
    if pt != pb or pl != pr:
        raise SystemExit("bench_torch.py: PyTorch's conv takes symmetric padding only")
    x = torch.randn(n, c, h, w)
    wt = torch.randn(o, c // groups, kh, kw)
    b = torch.randn(o) if bias else None
    stride, padding, dilation = [sh, sw], [pt, pl], [dh, dw]
    y = torch.nn.functional.conv2d(x, wt, b, stride, padding, dilation, groups)
    dy = torch.randn_like(y)
    back = torch.ops.aten.convolution_backward
    bias_sizes = [o] if bias else None
    return {
        "fwd": lambda: torch.nn.functional.conv2d(x, wt, b, stride, padding, dilation, groups),
        "bwd_data": lambda: back(dy, x, wt, bias_sizes, stride, padding, dilation, False, [0, 0], groups,
                                 [True, False, False]),
        "bwd_weights": lambda: back(dy, x, wt, bias_sizes, stride, padding, dilation, False, [0, 0], groups,
                                    [False, True, bool(bias)]),
    }


def maxpool_ops(torch, f):
    n, c, h, w, kh, kw, stride, pad = map(int, f)
    x = torch.randn(n, c, h, w)
    k, s, p, d = [kh, kw], [stride, stride], [pad, pad], [1, 1]
    y, idx = torch.ops.aten.max_pool2d_with_indices(x, k, s, p, d, False)
    dy = torch.randn_like(y)
    return {
        "fwd": lambda: torch.ops.aten.max_pool2d_with_indices(x, k, s, p, d, False),
        "bwd": lambda: torch.ops.aten.max_pool2d_with_indices_backward(dy, x, k, s, p, d, False, idx),
    }


def bnorm_ops(torch, f):
    n, c, h, w = map(int, f[:4])
    eps = float(f[4])
    x = torch.randn(n, c, h, w)
    g, b = torch.randn(c), torch.randn(c)
    rm, rv = torch.zeros(c), torch.ones(c)
    y, mean, invstd = torch.ops.aten.native_batch_norm(x, g, b, rm, rv, True, 0.1, eps)
    dy = torch.randn_like(y)
    return {
        "fwd": lambda: torch.ops.aten.native_batch_norm(x, g, b, rm, rv, True, 0.1, eps),
        "bwd": lambda: torch.ops.aten.native_batch_norm_backward(dy, x, g, rm, rv, mean, invstd, True, eps,
                                                                 [True, True, True]),
    }


def run_spec(path, warmup, reps):
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    makers = {"conv": conv_ops, "maxpool": maxpool_ops, "bnorm": bnorm_ops}
    with torch.no_grad(), open(path) as spec:
        for line in spec:
            fields = line.split()
            if not fields:
                continue
            kind, name = fields[0], fields[1]
            for op, fn in makers[kind](torch, fields[2:]).items():
                best, median = timed(fn, warmup, reps)
                print(f"{name},{op},{best:.4f},{median:.4f}", flush=True)


def plot(csv_path, png_path):
    import csv

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # total median per (layer, impl) over the ops of that layer, then relative to torch
    totals = {}
    with open(csv_path) as fh:
        for row in csv.DictReader(fh):
            key = (row["layer"], row["impl"])
            totals[key] = totals.get(key, 0.0) + float(row["median_ms"])
    layers = list(dict.fromkeys(layer for layer, _ in totals))
    impls = [i for i in dict.fromkeys(impl for _, impl in totals) if i != "torch"]
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(layers)), 5))
    width = 0.8 / max(1, len(impls))
    for k, impl in enumerate(impls):
        xs, ys = [], []
        for j, layer in enumerate(layers):
            if (layer, impl) in totals and (layer, "torch") in totals:
                xs.append(j + (k - (len(impls) - 1) / 2) * width)
                ys.append(totals[(layer, impl)] / totals[(layer, "torch")])
        ax.bar(xs, ys, width, label=impl)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(1.2, color="red", linestyle="--", linewidth=0.8, label="synk target 1.2x")
    ax.set_xticks(range(len(layers)))
    ax.set_xticklabels(layers, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("forward + backward time / PyTorch (1 thread, median)")
    ax.set_title("synk dnn primitives vs PyTorch 1.13, one thread")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


def main(argv):
    if len(argv) == 4 and argv[1] == "--plot":
        plot(argv[2], argv[3])
        return
    if len(argv) not in (2, 4):
        raise SystemExit("usage: bench_torch.py SPEC [WARMUP REPS] | bench_torch.py --plot CSV PNG")
    warmup, reps = (int(argv[2]), int(argv[3])) if len(argv) == 4 else (3, 20)
    run_spec(argv[1], warmup, reps)


if __name__ == "__main__":
    main(sys.argv)
