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
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_torch import held_out_main  # noqa: E402


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Unflatten(1, (1, 28, 28)),
        nn.Conv2d(1, 32, 3, padding="same", bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding="same", bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    held_out_main(__doc__, 29518, make_model, "cnn_torch")


if __name__ == "__main__":
    main()
