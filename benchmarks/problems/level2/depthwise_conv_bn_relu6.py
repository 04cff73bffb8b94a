"""Level 2: a depthwise 3x3 convolution, BatchNorm (inference) and ReLU6."""
# est. eager H200: ~2.5 ms (205M fp32 activation: depthwise conv ~1.2 ms below peak; BN + ReLU6 move 3.3 GB)

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (64, 256, 112), "tiny": (2, 4, 8)}  # batch, channels, spatial


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)
        self.norm = nn.BatchNorm2d(channels)
        with torch.no_grad():
            self.norm.running_mean.uniform_(-0.2, 0.2)
            self.norm.running_var.uniform_(0.5, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu6(self.norm(self.conv(x)))


def get_inputs():
    batch, channels, spatial = SIZES[SCALE]
    return [torch.randn(batch, channels, spatial, spatial)]


def get_init_inputs():
    return [SIZES[SCALE][1]]
