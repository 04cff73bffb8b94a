"""elementwise: an elementwise chain of two inputs (a model of tests/fixtures/inductor-h200-torch2.11/models.py, same H200 sizes)."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (16, 1048576), "tiny": (4, 256)}


class Model(nn.Module):
    def forward(self, x, y):
        return torch.tanh(x) * torch.sigmoid(y) + x * y - 0.1


def get_inputs():
    return [torch.randn(*SIZES[SCALE]), torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return []
