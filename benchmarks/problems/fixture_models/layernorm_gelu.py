"""layernorm_gelu: LayerNorm then GELU (a model of tests/fixtures/inductor-h200-torch2.11/models.py, same H200 sizes)."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (8192, 4096), "tiny": (8, 64)}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(SIZES[SCALE][1])

    def forward(self, x):
        return F.gelu(self.ln(x))


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return []
