"""matmul_bias_relu: Linear(1024, 4096), ReLU, scale and shift (a model of tests/fixtures/inductor-h200-torch2.11/models.py, same H200 sizes)."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (1024, 4096, 4096), "tiny": (32, 64, 16)}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(SIZES[SCALE][0], SIZES[SCALE][1])

    def forward(self, x):
        return F.relu(self.linear(x)) * 0.5 + 1.0


def get_inputs():
    return [torch.randn(SIZES[SCALE][2], SIZES[SCALE][0])]


def get_init_inputs():
    return []
