"""KernelBench-scale memory-bound set: Huber loss (delta 1) between two 16384 x 32768 tensors."""
# est. eager H200: ~1.4 ms (2 x 537M fp32: read 4.29 GB at ~3 TB/s, a scalar result)

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

LEVEL = 1
SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (16384, 32768), "tiny": (8, 64)}


class Model(nn.Module):
    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.huber_loss(predictions, targets, delta=1.0)


def get_inputs():
    return [torch.randn(*SIZES[SCALE]) * 2.0, torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return []
