"""Adversarial-corpus problem: a persistent-reduction row softmax (tiny, odd sizes)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(10, 37)]


def get_init_inputs():
    return []
