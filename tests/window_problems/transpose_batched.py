"""A batched transpose (B, M, N) -> (B, N, M), made contiguous."""

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(1, 2).contiguous()


def get_inputs():
    return [torch.randn(3, 20, 36)]


def get_init_inputs():
    return []
