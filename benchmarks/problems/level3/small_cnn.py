"""Level 3: a small image classifier: three conv-ReLU stages with pooling, global average pool, linear head."""
# est. eager H200: ~2 ms (convs 85 GFLOP at ~150 TFLOP/s ~0.6 ms; ReLU/pool passes move ~3 GB ~1 ms)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (256, 128, 10), "tiny": (2, 8, 4)}  # batch, image size, classes


class Model(nn.Module):
    def __init__(self, classes: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(128, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def get_inputs():
    batch, size, _ = SIZES[SCALE]
    return [torch.randn(batch, 3, size, size)]


def get_init_inputs():
    return [SIZES[SCALE][2]]
