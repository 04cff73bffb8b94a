"""Level 2: KernelBench level 2 problem 85, Conv2d_GroupNorm_Scale_MaxPool_Clamp, at its published sizes."""
# Source: KernelBench (ScalingIntelligence/KernelBench) KernelBench/level2/85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py,
# read from the fork sfc-gh-goliaro/KernelBench at 0f87aa0; model and sizes kept, plus the SCALE knob.
# est. eager H200: ~1.5 ms (conv 9.3 GFLOP ~0.07 ms; the 0.52 GB conv output written, read by the statistics, read by the pooled apply, which writes 1/16 of it)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
# batch, in_channels, out_channels, height = width, kernel_size, num_groups, maxpool kernel
SIZES = {"h200": (128, 8, 64, 128, 3, 16, 4), "tiny": (2, 3, 8, 25, 3, 4, 4)}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups, scale_shape, maxpool_kernel_size,
                 clamp_min, clamp_max):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        self.scale = nn.Parameter(torch.ones(scale_shape))
        self.maxpool = nn.MaxPool2d(kernel_size=maxpool_kernel_size)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        x = self.conv(x)
        x = self.group_norm(x)
        x = x * self.scale
        x = self.maxpool(x)
        return torch.clamp(x, self.clamp_min, self.clamp_max)


def get_inputs():
    batch, in_channels, _, size, _, _, _ = SIZES[SCALE]
    return [torch.rand(batch, in_channels, size, size)]


def get_init_inputs():
    _, in_channels, out_channels, _, kernel_size, groups, pool = SIZES[SCALE]
    return [in_channels, out_channels, kernel_size, groups, (out_channels, 1, 1), pool, 0.0, 1.0]
