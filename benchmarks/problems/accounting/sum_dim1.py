"""sum_dim1: x.sum(dim=1) over 128 x 4096 x 4095: the measurement notes' second case."""

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (128, 4096, 4095), "tiny": (4, 64, 7)}


class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=1)


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return []
