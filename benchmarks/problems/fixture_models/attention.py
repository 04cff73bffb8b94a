"""attention: softmax(q k^T / 8) v (a model of tests/fixtures/inductor-h200-torch2.11/models.py, same H200 sizes)."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (16, 16, 1024, 64), "tiny": (1, 2, 16, 8)}


class Model(nn.Module):
    def forward(self, q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2) / 8.0, -1) @ v


def get_inputs():
    return [torch.randn(*SIZES[SCALE]) for _ in range(3)]


def get_init_inputs():
    return []
