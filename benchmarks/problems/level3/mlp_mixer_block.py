"""Level 3: an MLP-Mixer block: token mixing across the sequence, then channel mixing, each with LayerNorm and a residual."""
# est. eager H200: ~2.5 ms (103 GFLOP of GEMMs at ~50 TFLOP/s ~2 ms; LN, GELU, transposes ~0.5 ms)

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (64, 256, 512), "tiny": (2, 8, 16)}  # batch, tokens, channels


class Model(nn.Module):
    def __init__(self, tokens: int, channels: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(channels)
        self.token_fc1 = nn.Linear(tokens, 4 * tokens)
        self.token_fc2 = nn.Linear(4 * tokens, tokens)
        self.norm2 = nn.LayerNorm(channels)
        self.channel_fc1 = nn.Linear(channels, 4 * channels)
        self.channel_fc2 = nn.Linear(4 * channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mixed = self.norm1(x).transpose(1, 2)
        x = x + self.token_fc2(F.gelu(self.token_fc1(mixed))).transpose(1, 2)
        return x + self.channel_fc2(F.gelu(self.channel_fc1(self.norm2(x))))


def get_inputs():
    return [torch.randn(*SIZES[SCALE])]


def get_init_inputs():
    return [SIZES[SCALE][1], SIZES[SCALE][2]]
