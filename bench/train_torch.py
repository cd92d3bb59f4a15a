#!/usr/bin/python3
"""The PyTorch baseline of bench/train_bench: the Fashion-MNIST training step of
examples/fashion_mnist in PyTorch (1.13, CPU), for an epoch-time comparison.

Same model (784-256-256-10 ReLU MLP, float32, nn.Linear's initialisation), same data (the gzipped
IDX files, images kept as bytes and scaled to [0, 1] inside each step, as synk's graph does),
same global batch (256 rows, the training set reshuffled every epoch), same loss (mean
cross-entropy over the step's rows) and optimizer (SGD, lr 0.05, momentum 0.9; torch's
v = m v + g, p -= lr v is synk's v = m v - lr g, p += v for a constant lr). Timed: the training
loop of each epoch only (no evaluation), like fashion_mnist's "train" time.

Variants: one process with --threads N (torch.set_num_threads), or --ddp R processes of one
thread each under DistributedDataParallel over gloo, each taking its 1/R of every global batch
(DDP averages the gradients, so the step is the same mean-loss gradient).

Prints one JSON object per line: {"variant", "epoch", "seconds", "loss"} per epoch, then
{"variant", "summary": true, "median_epoch_s", "test_accuracy"}.
"""
import argparse
import functools
import gzip
import json
import os
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openblas_core import match_synk  # noqa: E402

match_synk()   # PyTorch's matrix products on the BLAS kernels synk would use (bench/openblas_core.py)

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    array = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if array.size != int(np.prod(dims)):
        raise SystemExit(f"train_torch: {path}: {array.size} values, header says {dims}")
    return array.reshape(dims)


def load(split):
    images = read_idx(os.path.join(DATA_DIR, f"{split}-images-idx3-ubyte.gz")).reshape(-1, 784)
    labels = read_idx(os.path.join(DATA_DIR, f"{split}-labels-idx1-ubyte.gz")).astype(np.int64)
    return torch.from_numpy(images.copy()), torch.from_numpy(labels)


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))


def train_epochs(args, rank, world, variant, emit, model, images, labels, train_rows):
    """The timed training loop of both baselines (this MLP and bench/cnn_torch.py's CNN): SGD with
    momentum on the mean cross-entropy, `train_rows` reshuffled every epoch (the same order on every
    rank), each rank taking its 1/world of every global batch. Returns (the trained model, without
    its DDP wrapper, and each epoch's seconds)."""
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(args.seed)
    rows = train_rows.shape[0]
    times = []
    for epoch in range(1, args.epochs + 1):
        model.train()
        order = train_rows[torch.randperm(rows, generator=generator)]
        if world > 1:
            dist.barrier()
        start = time.perf_counter()
        loss_sum, steps = 0.0, 0
        for begin in range(0, rows, args.batch):
            batch = order[begin:begin + args.batch]
            share = batch[rank * len(batch) // world:(rank + 1) * len(batch) // world]
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(images[share].float() / 255), labels[share])
            if world > 1 and len(share) != len(batch) // world:
                # uneven last batch: weight this rank's mean so that DDP's average is the global mean
                loss = loss * (len(share) * world / len(batch))
            loss.backward()
            optimizer.step()
            loss_sum += float(loss.detach())
            steps += 1
        if world > 1:
            dist.barrier()
        seconds = time.perf_counter() - start
        times.append(seconds)
        if rank == 0:
            emit({"variant": variant, "epoch": epoch, "seconds": seconds, "loss": loss_sum / steps})
    return (model.module if world > 1 else model), times


def emit_summary(emit, variant, net, times):
    """The test accuracy (in chunks of 1,000 images, evaluation mode) and the median epoch time."""
    test_images, test_labels = load("t10k")
    net.eval()
    correct = 0
    with torch.no_grad():
        for begin in range(0, test_images.shape[0], 1000):
            x = test_images[begin:begin + 1000].float() / 255
            correct += int((net(x).argmax(1) == test_labels[begin:begin + 1000]).sum())
    emit({"variant": variant, "summary": True, "median_epoch_s": statistics.median(times),
          "test_accuracy": correct / test_images.shape[0]})


def train(args, rank, world, variant, emit):
    images, labels = load("train")
    net, times = train_epochs(args, rank, world, variant, emit, make_model(args.seed), images, labels,
                              torch.arange(images.shape[0]))
    if rank == 0:
        emit_summary(emit, variant, net, times)


def emit_stdout(record):
    print(json.dumps(record), flush=True)


def ddp_worker(rank, train, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.ddp)
    try:
        train(args, rank, args.ddp, f"torch-ddp{args.ddp}", emit_stdout)
    finally:
        dist.destroy_process_group()


def baseline_arguments(description, port):
    """The options every PyTorch baseline takes (bench/cnn_torch.py adds its own)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of the single process")
    parser.add_argument("--ddp", type=int, default=0, help="DistributedDataParallel over gloo with this many processes")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, default=port)
    return parser


def run_baseline(train, args, name):
    """Runs train() as the chosen variant: DDP processes, or one process with --threads threads."""
    if args.ddp > 1:
        mp.spawn(ddp_worker, args=(train, args), nprocs=args.ddp, join=True)
    else:
        torch.set_num_threads(args.threads)
        if torch.get_num_threads() != args.threads:
            sys.exit(f"{name}: asked for {args.threads} threads, torch runs {torch.get_num_threads()}")
        train(args, 0, 1, f"torch-t{args.threads}", emit_stdout)


def train_held_out(make_model, args, rank, world, variant, emit):
    """The convolutional baselines' run (cnn_torch, resnet_torch): the examples' held-out split of
    the training set (the same seed), optionally only its first --limit images."""
    images, labels = load("train")
    split = torch.randperm(images.shape[0], generator=torch.Generator().manual_seed(0x5eed))
    train_rows = split[:images.shape[0] - args.holdout]
    if args.limit:
        train_rows = train_rows[:args.limit]
    net, times = train_epochs(args, rank, world, variant, emit, make_model(args.seed), images, labels, train_rows)
    if rank == 0:
        emit_summary(emit, variant, net, times)


def held_out_main(doc, port, make_model, name):
    """The command line of a convolutional baseline: the common options plus --holdout and --limit."""
    parser = baseline_arguments(doc.split("\n\n")[0], port)
    parser.add_argument("--holdout", type=int, default=5000)
    parser.add_argument("--limit", type=int, default=0, help="train on the first N training images only (0: all)")
    args = parser.parse_args()
    if args.threads < 1 or args.epochs < 1 or args.batch < 1 or args.ddp < 0 or args.limit < 0:
        parser.error("--threads, --epochs and --batch must be at least 1, --ddp and --limit at least 0")
    run_baseline(functools.partial(train_held_out, make_model), args, name)


def main():
    parser = baseline_arguments(__doc__.split("\n\n")[0], 29517)
    args = parser.parse_args()
    if args.threads < 1 or args.epochs < 1 or args.batch < 1 or args.ddp < 0:
        parser.error("--threads, --epochs and --batch must be at least 1, --ddp at least 0")
    run_baseline(train, args, "train_torch")


if __name__ == "__main__":
    main()
