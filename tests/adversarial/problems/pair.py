"""Adversarial-corpus problem: a pointwise chain of two same-shaped inputs (a clamp of x, a sigmoid of y and
tanh(x - y)): what one input, the other, or both being the same tensor may change."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, -1.0, 1.0) * torch.sigmoid(y) + torch.tanh(x - y)


def get_inputs():
    return [torch.randn(16, 48), torch.randn(16, 48)]


def get_init_inputs():
    return []
