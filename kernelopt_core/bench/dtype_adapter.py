"""A bf16 view of a problem file: the same problem, its model and floating-point inputs cast.

Written next to the problem's work files so every stage (eager, compile, optimize) sees one
consistent problem through the unchanged KernelBench interface.
"""

from __future__ import annotations

import os

_TEMPLATE = '''"""bf16 view of {path} (written by kernelopt bench --dtype bf16)."""
import importlib.util as _util

import torch

_spec = _util.spec_from_file_location("kernelopt_bf16_base_{tag}", {path!r})
_base = _util.module_from_spec(_spec)
_spec.loader.exec_module(_base)


class Model(_base.Model):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.to(torch.bfloat16)


def _cast(value):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(torch.bfloat16)
    return value


def get_inputs():
    return [_cast(x) for x in _base.get_inputs()]


def get_init_inputs():
    return _base.get_init_inputs()
'''


def write_bf16_problem(problem_path: str, work_dir: str) -> str:
    os.makedirs(work_dir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(problem_path))[0]
    tag = "".join(c if c.isalnum() else "_" for c in stem)
    path = os.path.join(work_dir, f"{stem}_bf16.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(_TEMPLATE.format(path=os.path.abspath(problem_path), tag=tag))
    return path
