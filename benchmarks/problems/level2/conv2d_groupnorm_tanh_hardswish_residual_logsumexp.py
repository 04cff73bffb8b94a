"""Level 2: KernelBench level 2 problem 92, Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp, at its
published sizes."""
# Source: KernelBench (ScalingIntelligence/KernelBench)
# KernelBench/level2/92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp.py, read from the fork
# sfc-gh-goliaro/KernelBench at abab9ca; model and sizes kept, plus the SCALE knob.
# est. eager H200: ~2 ms (conv 9.3 GFLOP ~0.07 ms; the 0.52 GB conv output written, read by the statistics and by the logsumexp over channels, eager's intermediates several times that)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
# batch, in_channels, out_channels, height = width, kernel_size, groups
SIZES = {"h200": (128, 8, 64, 128, 3, 16), "tiny": (1, 3, 4, 25, 3, 2)}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups, eps=1e-5):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(groups, out_channels, eps=eps)
        self.tanh = nn.Tanh()
        self.hard_swish = nn.Hardswish()

    def forward(self, x):
        x_conv = self.conv(x)
        x_norm = self.group_norm(x_conv)
        x_tanh = self.tanh(x_norm)
        x_hard_swish = self.hard_swish(x_tanh)
        x_res = x_conv + x_hard_swish
        return torch.logsumexp(x_res, dim=1, keepdim=True)


def get_inputs():
    batch, in_channels, _, size, _, _ = SIZES[SCALE]
    return [torch.rand(batch, in_channels, size, size)]


def get_init_inputs():
    _, in_channels, out_channels, _, kernel_size, groups = SIZES[SCALE]
    return [in_channels, out_channels, kernel_size, groups]
