#!/usr/bin/python3
"""The PyTorch baseline of ResNet-20 on Fashion-MNIST (examples/resnet, fashion_resnet20): the model
of resnet20_fashion.synk trained in PyTorch (1.13, CPU) the way fashion_resnet20 trains it, for an
epoch-time comparison.

Same model (CIFAR-style ResNet-20: 3x3 stem 1->16 whose padding 3 zero-pads the 28x28 image to
32x32, three stages of three basic blocks with 16/32/64 channels, stride-2 first convs and 1x1
projection shortcuts with batch norm where the shape changes, global average pooling, Linear
64->10; convs without bias, float32), same data (bytes scaled to [0, 1] inside each step; the
last 5,000 of a fixed shuffle of the training set held out), same global batch 256 reshuffled
every epoch, mean cross-entropy, SGD lr 0.05 momentum 0.9. Timed: the training loop of each epoch
only. Initialisation is PyTorch's default (it does not change the time).

Variants: one process with --threads N, or --ddp R processes of one thread each under
DistributedDataParallel over gloo. Prints one JSON object per line, as bench/cnn_torch.py.
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_torch import held_out_main  # noqa: E402


def conv_bn(cin, cout, kernel, stride, padding):
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, padding, bias=False), nn.BatchNorm2d(cout))


class Basic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = conv_bn(cin, cout, 3, stride, 1)
        self.c2 = conv_bn(cout, cout, 3, 1, 1)
        self.down = conv_bn(cin, cout, 1, stride, 0) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x):
        return torch.relu(self.c2(torch.relu(self.c1(x))) + self.down(x))


def make_model(seed):
    torch.manual_seed(seed)
    layers = [nn.Unflatten(1, (1, 28, 28)), conv_bn(1, 16, 3, 1, 3), nn.ReLU()]
    cin = 16
    for stage, width in enumerate([16, 32, 64]):
        for block in range(3):
            layers.append(Basic(cin, width, 2 if stage > 0 and block == 0 else 1))
            cin = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*layers)


def main():
    held_out_main(__doc__, 29519, make_model, "resnet_torch")


if __name__ == "__main__":
    main()
