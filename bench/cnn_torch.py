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
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_torch import baseline_arguments, load, run_baseline  # noqa: E402  (IDX reader, variants)


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


def main():
    parser = baseline_arguments(__doc__.split("\n\n")[0], 29518)
    parser.add_argument("--holdout", type=int, default=5000)
    parser.add_argument("--limit", type=int, default=0, help="train on the first N training images only (0: all)")
    args = parser.parse_args()
    if args.threads < 1 or args.epochs < 1 or args.batch < 1 or args.ddp < 0 or args.limit < 0:
        parser.error("--threads, --epochs and --batch must be at least 1, --ddp and --limit at least 0")
    run_baseline(train, args, "cnn_torch")


if __name__ == "__main__":
    main()
