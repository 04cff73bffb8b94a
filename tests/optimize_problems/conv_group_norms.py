"""A tiny KernelBench-format problem for the channel_groups family (tests/test_channel_groups.py).

KernelBench level 2's problem 92 in small: a conv whose output Inductor keeps channels-last (the input
is channels-last), a group norm over groups of 4 channels, tanh, hardswish, the residual and a logsumexp
over channels; and an instance norm of the same conv output (groups of 1 channel). Compiled with
TORCHINDUCTOR_PERSISTENT_REDUCTIONS=0 both statistics are looped Welford reductions whose rows read a
group's channels of every pixel."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3)
        self.group_norm = nn.GroupNorm(4, 16)

    def forward(self, x: torch.Tensor):
        x_conv = self.conv(x)
        x_norm = self.group_norm(x_conv)
        x_res = x_conv + F.hardswish(torch.tanh(x_norm))
        instance = F.instance_norm(x_conv * 0.5)
        return torch.logsumexp(x_res, dim=1, keepdim=True), instance


def get_inputs():
    return [torch.randn(2, 3, 22, 22).contiguous(memory_format=torch.channels_last)]


def get_init_inputs():
    return []
