"""Adversarial-corpus problem: a pointwise kernel with a broadcast bias (tiny, odd sizes)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * torch.sigmoid(y) + x * bias - 0.1


def get_inputs():
    return [torch.randn(12, 37), torch.randn(12, 37), torch.randn(37)]


def get_init_inputs():
    return []
