"""avg_pool2d(kernel 3, stride 1, padding 1): count_include_pad, a constant divisor."""

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(x, 3, 1, 1)


def get_inputs():
    return [torch.randn(2, 3, 11, 13)]


def get_init_inputs():
    return []
