"""softmax: softmax over rows (a model of tests/fixtures/inductor-h200-torch2.11/models.py, same H200 sizes)."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (4096, 8192), "tiny": (8, 64)}


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return []
