"""Adversarial-corpus problem: a pointwise clamp (a third of the outputs sit on a bound)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x * 1.5, -1.0, 1.0)


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
