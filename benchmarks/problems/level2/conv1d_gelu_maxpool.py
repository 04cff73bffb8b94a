"""Level 2: a 1-d convolution over a long sequence, GELU, then max pooling by 2."""
# est. eager H200: ~1.8 ms (172 GFLOP at ~150 TFLOP/s ~1.2 ms; GELU + pool move ~1.9 GB)

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (64, 128, 256, 8192), "tiny": (2, 4, 8, 32)}  # batch, in, out, length


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, 5, padding=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool1d(F.gelu(self.conv(x)), 2)


def get_inputs():
    batch, cin, _, length = SIZES[SCALE]
    return [torch.randn(batch, cin, length)]


def get_init_inputs():
    return [SIZES[SCALE][1], SIZES[SCALE][2]]
