#!/usr/bin/python3
"""The PyTorch baseline of bench/cnn_bench.py: the CNN of examples/fashion_cnn (cnn.synk) trained
in PyTorch (1.13, CPU) the way fashion_cnn trains it, for an epoch-time (and accuracy) comparison.

Same model (conv 1->32 3x3 same, no bias, BatchNorm2d, ReLU, 2x2 max pool; conv 32->64 likewise;
flatten; Linear 3136->128, ReLU; Linear 128->10; float32, PyTorch's default initialisation, which
cnn.synk copies), same data (bytes scaled to [0, 1] inside each step; the last 5,000 of a fixed
shuffle of the training set held out, as fashion_cnn's --holdout 5000), same global batch 256
reshuffled every epoch, mean cross-entropy, SGD lr 0.05 momentum 0.9. Timed: the training loop of
each epoch only (no evaluation), like fashion_cnn's "train" time.

Variants: one process with --threads N, or --ddp R processes of one thread each under
DistributedDataParallel over gloo (each takes its 1/R of every global batch; batch norm uses each
process's own rows, as fashion_cnn's ranks do).

Prints one JSON object per line: {"variant", "epoch", "seconds", "loss"} per epoch, then
{"variant", "summary": true, "median_epoch_s", "test_accuracy"}.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_torch import load  # noqa: E402  (the gzipped IDX reader)


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Unflatten(1, (1, 28, 28)),
        nn.Conv2d(1, 32, 3, padding="same", bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding="same", bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def train(args, rank, world, variant, emit):
    images, labels = load("train")
    split = torch.randperm(images.shape[0], generator=torch.Generator().manual_seed(0x5eed))
    train_rows = split[:images.shape[0] - args.holdout]
    if args.limit:
        train_rows = train_rows[:args.limit]
    model = make_model(args.seed)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(args.seed)
    rows = train_rows.shape[0]
    times = []
    for epoch in range(1, args.epochs + 1):
        model.train()
        order = train_rows[torch.randperm(rows, generator=generator)]   # same on every rank
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
    if rank == 0:
        test_images, test_labels = load("t10k")
        net = model.module if world > 1 else model
        net.eval()
        correct = 0
        with torch.no_grad():
            for begin in range(0, test_images.shape[0], 1000):
                x = test_images[begin:begin + 1000].float() / 255
                correct += int((net(x).argmax(1) == test_labels[begin:begin + 1000]).sum())
        emit({"variant": variant, "summary": True, "median_epoch_s": statistics.median(times),
              "test_accuracy": correct / test_images.shape[0]})


def emit_stdout(record):
    print(json.dumps(record), flush=True)


def ddp_worker(rank, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.ddp)
    try:
        train(args, rank, args.ddp, f"torch-ddp{args.ddp}", emit_stdout)
    finally:
        dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads of the single process")
    parser.add_argument("--ddp", type=int, default=0, help="DistributedDataParallel over gloo with this many processes")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--holdout", type=int, default=5000)
    parser.add_argument("--limit", type=int, default=0, help="train on the first N training images only (0: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, default=29518)
    args = parser.parse_args()
    if args.threads < 1 or args.epochs < 1 or args.batch < 1 or args.ddp < 0 or args.limit < 0:
        parser.error("--threads, --epochs and --batch must be at least 1, --ddp and --limit at least 0")
    if args.ddp > 1:
        mp.spawn(ddp_worker, args=(args,), nprocs=args.ddp, join=True)
    else:
        torch.set_num_threads(args.threads)
        train(args, 0, 1, f"torch-t{args.threads}", emit_stdout)


if __name__ == "__main__":
    main()
