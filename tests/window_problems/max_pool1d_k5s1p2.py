"""max_pool1d(kernel 5, stride 1, padding 2): a stride-1 window of odd length along the contiguous dimension."""

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool1d(x, 5, 1, 2)


def get_inputs():
    return [torch.randn(2, 3, 37)]


def get_init_inputs():
    return []
