"""Adversarial-corpus problem: a layer norm over rows of 1000 (a persistent reduction, no affine)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (1000,), eps=1e-5)


def get_inputs():
    return [torch.randn(5, 1000)]


def get_init_inputs():
    return []
