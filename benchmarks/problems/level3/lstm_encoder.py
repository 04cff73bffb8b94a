"""Level 3: a two-layer LSTM encoder with a linear head on the last step (cuDNN RNN: no Triton kernels expected)."""
# est. eager H200: ~5 ms (512 sequential steps of 64 x 1024 x 2048 GEMMs, latency-bound: ~10 us each)

import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (64, 256, 512, 128), "tiny": (2, 4, 8, 4)}  # batch, steps, hidden, out


class Model(nn.Module):
    def __init__(self, hidden: int, out_features: int):
        super().__init__()
        self.lstm = nn.LSTM(hidden, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output, _ = self.lstm(x)
        return self.head(output[:, -1])


def get_inputs():
    batch, steps, hidden, _ = SIZES[SCALE]
    return [torch.randn(batch, steps, hidden)]


def get_init_inputs():
    return [SIZES[SCALE][2], SIZES[SCALE][3]]
