"""Level 3: a pre-LayerNorm transformer encoder layer (SDPA attention, GELU MLP, two residuals)."""
# est. eager H200: ~6 ms (206 GFLOP of projections/MLP at ~50 TFLOP/s ~4.1 ms; fp32 SDPA 34 GFLOP ~1 ms; LN/GELU ~0.5 ms)

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = os.environ.get("KERNELOPT_PROBLEM_SCALE", "h200")
SIZES = {"h200": (8, 1024, 1024, 16), "tiny": (2, 8, 16, 2)}  # batch, sequence, model dim, heads


class Model(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.view(batch, seq, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, seq, dim))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def get_inputs():
    batch, seq, dim, _ = SIZES[SCALE]
    return [torch.randn(batch, seq, dim)]


def get_init_inputs():
    return [SIZES[SCALE][2], SIZES[SCALE][3]]
