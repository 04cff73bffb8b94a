"""Remove bounds masks when the size divides the block: a fixed block size that divides the
(fixed) numel means no program ever runs past the end, so loads and stores need no mask.

The rewrite pins the block size in an explicit launch config and leaves a marker comment
(``# kernelopt: XBLOCK divides xnumel``) so later launch-config rewrites keep the promise.
"""

from __future__ import annotations

import re

from .base import Rewrite, RewriteContext, RewriteFamily, call_spans, split_args
from .kernel_source import (
    DIVIDES_MARKER,
    KernelModule,
    KernelSourceError,
    LaunchConfig,
    parse_kernel_module,
    with_launch_config,
)
from .launch_config import block_choices, candidate_configs

_DIMS = {"x": "XBLOCK", "y": "YBLOCK", "r0_": "R0_BLOCK"}


def removable_masks(module: KernelModule) -> list[str]:
    """Mask names (xmask, ymask, r0_mask) computed by a bounds check on a fixed numel."""
    out = []
    for prefix, block in _DIMS.items():
        numel = module.numels.get(f"{prefix}numel" if prefix != "r0_" else "r0_numel")
        mask = f"{prefix}mask"
        if numel is None or block not in module.block_params:
            continue
        if re.search(rf"^\s*{mask} = {prefix}index < {prefix}numel\s*$", module.text, re.MULTILINE):
            out.append(mask)
    return out


def drop_mask(text: str, mask: str, block: str, numel_name: str) -> str:
    """Make ``mask`` all-true and take it out of load/store masks."""
    index_line = re.search(rf"^\s*{mask.replace('mask', 'index')} = .*tl\.arange\(0, {block}\)(\[[^\]]*\])\s*$",
                           text, re.MULTILINE)
    subscript = index_line.group(1) if index_line else ""
    marker = DIVIDES_MARKER.format(block=block, numel=numel_name)
    text = re.sub(rf"^(\s*){mask} = \w+ < {numel_name}\s*$",
                  rf"\1{mask} = tl.full([{block}], True, tl.int1){subscript}  {marker}", text, flags=re.MULTILINE)
    edits = []
    for prefix in ("tl.load(", "tl.store("):
        for start, end in call_spans(text, prefix):
            args = split_args(text[start + len(prefix):end - 1])
            position = 1 if prefix == "tl.load(" else 2
            if len(args) <= position or "=" in args[position].split("(")[0]:
                continue
            terms = [t.strip() for t in args[position].split("&")]
            if mask not in terms:
                continue
            rest = [t for t in terms if t != mask]
            args[position] = " & ".join(rest) if rest else "None"
            if not rest and prefix == "tl.load(":
                args = [a for a in args if not a.replace(" ", "").startswith("other=")]
            edits.append((start, end, prefix + ", ".join(args) + ")"))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


class MaskRemovalFamily(RewriteFamily):
    name = "mask_removal"
    summary = "drop bounds masks when a fixed block size divides the fixed numel"

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        if ctx.module.heuristic not in ("pointwise", "reduction", "persistent_reduction"):
            return f"{ctx.module.heuristic} kernels keep their launcher"
        masks = removable_masks(ctx.module)
        if not masks:
            return "no bounds mask on a fixed numel"
        for mask in masks:
            block = _DIMS[mask.removesuffix("mask")]
            numel = ctx.module.numels[_numel_name(mask)]
            if any(numel % v == 0 for v in block_choices(ctx.module, block, ctx.on_cpu) if v > 1):
                return None
        return "no block size divides the numel"

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        module = ctx.module
        out: list[Rewrite] = []
        masks = removable_masks(module)
        text = module.text
        removed = []
        for mask in masks:
            block = _DIMS[mask.removesuffix("mask")]
            numel = module.numels[_numel_name(mask)]
            if any(numel % v == 0 for v in block_choices(module, block, ctx.on_cpu) if v > 1):
                text = drop_mask(text, mask, block, _numel_name(mask))
                removed.append(mask)
        try:
            edited = parse_kernel_module(text, module.name)
        except KernelSourceError:
            return []
        configs = []
        current = module.explicit_config
        if current is not None and all(_divides(edited, current, m) for m in removed):
            configs.append(current)
        configs += [c for c in candidate_configs(ctx, edited) if c not in configs]
        for config in configs[:6]:
            if not all(_divides(edited, config, m) for m in removed):
                continue
            try:
                source = with_launch_config(edited, config)
            except KernelSourceError:
                continue
            out.append(Rewrite(
                family=self.name, title=f"no {', '.join(removed)}; {config.label()}",
                detail="bounds masks removed: the block size divides the numel",
                source=source, params={"masks": removed, **config.to_json()},
            ))
        return out


def _numel_name(mask: str) -> str:
    return {"xmask": "xnumel", "ymask": "ynumel", "r0_mask": "r0_numel"}[mask]


def _divides(module: KernelModule, config: LaunchConfig, mask: str) -> bool:
    block = _DIMS[mask.removesuffix("mask")]
    value = config.block(block) or module.fixed_blocks.get(block)
    numel = module.numels.get(_numel_name(mask))
    return bool(value and numel and numel % value == 0)
