"""Level 3: multi-head self-attention written out (QKV projection, scaled softmax, output projection)."""
# est. eager H200: ~6 ms (206 GFLOP of GEMMs at ~50 TFLOP/s ~4.1 ms; scale + softmax on 1 GB of scores ~1.4 ms)

import math
import os

import torch
import torch.nn as nn

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (16, 1024, 1024, 16), "tiny": (2, 8, 16, 2)}  # batch, sequence, model dim, heads


class Model(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(batch, seq, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(dim // self.heads)
        context = torch.softmax(scores, dim=-1) @ v
        return self.out(context.transpose(1, 2).reshape(batch, seq, dim))


def get_inputs():
    batch, seq, dim, _ = SIZES[SCALE]
    return [torch.randn(batch, seq, dim)]


def get_init_inputs():
    return [SIZES[SCALE][2], SIZES[SCALE][3]]
