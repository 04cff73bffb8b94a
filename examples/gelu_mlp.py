"""A small KernelBench-format problem: a linear layer with a LayerNorm and GELU epilogue, plus a
row softmax. Small enough for the CPU Triton interpreter; the same file runs on a GPU.
KERNELOPT_PROBLEM_SCALE=tiny (what `kernelopt demo` uses on the CPU) takes 16 rows instead of 64:
the interpreter runs one program per row, so a quarter of the rows is a quarter of the time."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, features: int = 256):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.norm = nn.LayerNorm(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.norm(self.linear(x)))
        return torch.softmax(h * 0.5, dim=-1) + torch.tanh(x)


ROWS = {"tiny": 16}.get(os.environ.get("KERNELOPT_PROBLEM_SCALE", ""), 64)


def get_inputs():
    return [torch.randn(ROWS, 256)]


def get_init_inputs():
    return [256]
