"""transpose: permute(0, 2, 1).contiguous() times 2 (a model of tests/fixtures/inductor-h200-torch2.11/models.py, same H200 sizes)."""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (64, 2048, 1024), "tiny": (2, 16, 32)}


class Model(nn.Module):
    def forward(self, x):
        return x.permute(0, 2, 1).contiguous() * 2.0


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return []
