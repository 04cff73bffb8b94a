"""Level 2: a 3x3 convolution, BatchNorm (inference) and ReLU: the classic conv block."""
# est. eager H200: ~2.2 ms (conv 237 GFLOP at ~150 TFLOP/s cuDNN TF32 ~1.6 ms; BN + ReLU move 1.6 GB)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (64, 128, 112), "tiny": (2, 4, 8)}  # batch, channels, spatial


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.norm = nn.BatchNorm2d(channels)
        with torch.no_grad():
            self.norm.running_mean.uniform_(-0.2, 0.2)
            self.norm.running_var.uniform_(0.5, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(self.conv(x)))


def get_inputs():
    batch, channels, spatial = SIZES[SCALE]
    return [torch.randn(batch, channels, spatial, spatial)]


def get_init_inputs():
    return [SIZES[SCALE][1]]
