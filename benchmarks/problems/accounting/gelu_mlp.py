"""gelu_mlp: Linear(1024, 4096) then GELU."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (4096, 1024, 4096), "tiny": (8, 32, 64)}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(SIZES[SCALE][1], SIZES[SCALE][2])

    def forward(self, x):
        return F.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(SIZES[SCALE][0], SIZES[SCALE][1])]


def get_init_inputs():
    return []
