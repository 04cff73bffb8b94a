"""Level 2: KernelBench level 2 problem 21, Conv2d_Add_Scale_Sigmoid_GroupNorm, at its published sizes."""
# Source: KernelBench (ScalingIntelligence/KernelBench) KernelBench/level2/21_Conv2d_Add_Scale_Sigmoid_GroupNorm.py,
# read from the fork sfc-gh-goliaro/KernelBench at abab9ca; model and sizes kept, plus the SCALE knob.
# est. eager H200: ~3 ms (conv 19 GFLOP ~0.13 ms at ~150 TFLOP/s cuDNN TF32; the 1.06 GB conv output written, read by the statistics, read and written by the apply: ~4 GB)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
# batch, in_channels, out_channels, height = width, kernel_size, num_groups
SIZES = {"h200": (128, 8, 32, 256, 3, 8), "tiny": (1, 3, 4, 25, 3, 2)}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups, bias_shape, scale_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scale = nn.Parameter(torch.randn(scale_shape))
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        x = self.conv(x)
        x = x + self.bias
        x = x * self.scale
        x = torch.sigmoid(x)
        x = self.group_norm(x)
        return x


def get_inputs():
    batch, in_channels, _, size, _, _ = SIZES[SCALE]
    return [torch.rand(batch, in_channels, size, size)]


def get_init_inputs():
    _, in_channels, out_channels, _, kernel_size, groups = SIZES[SCALE]
    return [in_channels, out_channels, kernel_size, groups, (out_channels, 1, 1), (out_channels, 1, 1)]
