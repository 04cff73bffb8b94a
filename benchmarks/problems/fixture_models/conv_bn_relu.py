"""conv_bn_relu: Conv2d 3x3, BatchNorm, ReLU (a model of tests/fixtures/inductor-h200-torch2.11/models.py, same H200 sizes)."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (32, 64, 128, 56), "tiny": (2, 4, 8, 8)}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        batch, cin, cout, side = SIZES[SCALE]
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(SIZES[SCALE][0], SIZES[SCALE][1], SIZES[SCALE][3], SIZES[SCALE][3])]


def get_init_inputs():
    return []
