"""avg_pool2d(kernel 3, stride 2, padding 1, ceil_mode, count_include_pad=False): a per-window divisor."""

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)


def get_inputs():
    return [torch.randn(2, 3, 10, 13)]


def get_init_inputs():
    return []
