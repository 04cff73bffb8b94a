"""max_pool2d(kernel 4, stride 1, padding 1) on a tiny ragged input: overlapping windows, padding on every edge."""

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(x, 4, 1, 1)


def get_inputs():
    return [torch.randn(2, 3, 11, 13)]


def get_init_inputs():
    return []
