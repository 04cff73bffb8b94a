"""Level 1: KL divergence between a log-distribution and a distribution, batchmean reduction."""
# est. eager H200: ~1.6 ms (2 x 134M fp32; log, sub, mul, sum = 9 passes x 537 MB = 4.8 GB)

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (16384, 8192), "tiny": (8, 64)}


class Model(nn.Module):
    def forward(self, log_q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return F.kl_div(log_q, p, reduction="batchmean")


def get_inputs():
    shape = SIZES[SCALE]
    return [torch.log_softmax(torch.randn(*shape), dim=-1), torch.softmax(torch.randn(*shape), dim=-1)]


def get_init_inputs():
    return []
