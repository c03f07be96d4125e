"""Models for `tsarchive trace`, `convert` and `inspect --graph/--ops`
(testdata/jit/, made by scripts/make_jit_testdata.py). Scripting needs their
source in a real file, hence this module."""

from typing import Tuple

import torch
from torch import nn


class MLPWithBatchNorm(nn.Module):
    """Saved in training mode: freezing must put it in eval mode (and say so)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.bn = nn.BatchNorm1d(16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.bn(self.fc1(x))))


class ValueLoop(nn.Module):
    """The loop count depends on the input's values: a trace bakes in the
    count of its example input and does not generalise."""

    def forward(self, x):
        y = torch.zeros_like(x)
        n = int((x > 0).sum())
        for _ in range(n):
            y = y + x
        return y


class GRUEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 8, batch_first=True)

    def forward(self, x) -> Tuple[torch.Tensor, torch.Tensor]:
        out, h = self.gru(x)
        return out, h


class ConvBNReLU(nn.Sequential):
    def __init__(self, cin, cout, stride):
        super().__init__(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class SmallConvNet(nn.Module):
    """torchvision-like: conv-bn-relu stages, global pooling, a classifier."""

    def __init__(self, classes=5):
        super().__init__()
        self.features = nn.Sequential(ConvBNReLU(3, 8, 2), ConvBNReLU(8, 16, 2), ConvBNReLU(16, 16, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(16, classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


class Labelled(nn.Module):
    """Returns a string beside the tensor: the tracer cannot record it."""

    def forward(self, x) -> Tuple[torch.Tensor, str]:
        return x * 2, "doubled"


class QuantMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Forked(nn.Module):
    """Runs a branch asynchronously (torch.jit.fork): the mobile bytecode
    cannot express it, so torch.jit.export_opnames throws."""

    def forward(self, x):
        future = torch.jit._fork(torch.neg, x)
        return torch.jit._wait(future) + x
