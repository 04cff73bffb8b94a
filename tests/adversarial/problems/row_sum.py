"""Adversarial-corpus problem: a looped row reduction whose length is not a multiple of the block."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1) * 0.5


def get_inputs():
    return [torch.randn(6, 1500)]


def get_init_inputs():
    return []
