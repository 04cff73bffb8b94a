"""Level 2: KernelBench level 2 problem 17, Conv2d_InstanceNorm_Divide, at its published sizes."""
# Source: KernelBench (ScalingIntelligence/KernelBench) KernelBench/level2/17_Conv2d_InstanceNorm_Divide.py,
# read from the fork sfc-gh-goliaro/KernelBench at 0f87aa0; model and sizes kept, plus the SCALE knob.
# est. eager H200: ~4 ms (conv 297 GFLOP at ~150 TFLOP/s cuDNN TF32 ~2 ms; the 1.04 GB conv output written, read by the statistics, read and written by the apply: ~4 GB)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
# batch, in_channels, out_channels, height = width, kernel_size
SIZES = {"h200": (128, 64, 128, 128, 3), "tiny": (2, 3, 4, 36, 3)}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divide_by):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.instance_norm = nn.InstanceNorm2d(out_channels)
        self.divide_by = divide_by

    def forward(self, x):
        x = self.conv(x)
        x = self.instance_norm(x)
        return x / self.divide_by


def get_inputs():
    batch, in_channels, _, size, _ = SIZES[SCALE]
    return [torch.rand(batch, in_channels, size, size)]


def get_init_inputs():
    _, in_channels, out_channels, _, kernel_size = SIZES[SCALE]
    return [in_channels, out_channels, kernel_size, 2.0]
