"""A KernelBench-format problem whose model calls the Triton layer norm of ``layer_norm.py``.

``kernelopt profile layer_norm.py --kernel _layer_norm_fwd_fused --harness layer_norm_problem.py``
runs ``Model(*get_init_inputs())(*get_inputs())`` and captures the kernel's launches in it.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from layer_norm import DEVICE, layer_norm  # noqa: E402

M, N = (4096, 4096) if DEVICE == "cuda" else (4, 96)


class Model(torch.nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(features))
        self.bias = torch.nn.Parameter(torch.rand(features))

    def forward(self, x):
        return layer_norm(x, (x.shape[-1], ), self.weight, self.bias, 1e-5)


def get_inputs():
    return [torch.randn(M, N, device=DEVICE)]


def get_init_inputs():
    return [N]
