"""Level 3: a MobileNetV2 inverted residual block (1x1 expand, depthwise 3x3, 1x1 project, residual)."""
# est. eager H200: ~2 ms (1x1 convs 53 GFLOP ~0.4 ms; BN/ReLU6/depthwise over the 411 MB expanded activation ~1.4 ms)

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (64, 128, 56, 4), "tiny": (2, 4, 6, 2)}  # batch, channels, spatial, expansion


class Model(nn.Module):
    def __init__(self, channels: int, expansion: int):
        super().__init__()
        hidden = channels * expansion
        self.expand = nn.Conv2d(channels, hidden, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(hidden)
        self.depthwise = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False)
        self.bn2 = nn.BatchNorm2d(hidden)
        self.project = nn.Conv2d(hidden, channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)
        with torch.no_grad():
            for norm in (self.bn1, self.bn2, self.bn3):
                norm.running_mean.uniform_(-0.2, 0.2)
                norm.running_var.uniform_(0.5, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu6(self.bn1(self.expand(x)))
        h = F.relu6(self.bn2(self.depthwise(h)))
        return x + self.bn3(self.project(h))


def get_inputs():
    batch, channels, spatial, _ = SIZES[SCALE]
    return [torch.randn(batch, channels, spatial, spatial)]


def get_init_inputs():
    return [SIZES[SCALE][1], SIZES[SCALE][3]]
