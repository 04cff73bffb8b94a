"""Rewrite families for a project's own Triton kernels (docs/user-kernels.md).

Inductor's families read Inductor's conventions (``@triton_heuristics``, ``XBLOCK``, ``r0_numel``).
A hand-written kernel has its own: meta-parameters the wrapper passes (left alone, the wrapper
owns them) and ones ``@triton.autotune`` or a default chooses (ours to tune). Both families say
"not applicable" for an Inductor kernel module, so Inductor searches are unchanged.

* ``user_autotune``: autotune configs for the meta-parameters the caller does not pass: larger
  and smaller blocks and other warp counts for an autotuned kernel; an ``@triton.autotune``
  over the block sizes for a kernel whose block is a ``tl.constexpr`` default;
* ``user_fast_math``: ``tl.exp(x)`` as ``tl.exp2(x * log2(e))``, ``tl.log`` as ``tl.log2 * ln 2``,
  and a division by a row statistic as a multiplication by its reciprocal, computed once.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from .base import Rewrite, RewriteContext, RewriteFamily

LOG2E = "1.4426950408889634"
LN2 = "0.6931471805599453"
_MARKER = re.compile(r"^# kernelopt: the caller passes (.+)$", re.MULTILINE)
_OPTIONS = ("num_warps", "num_stages", "num_ctas")


def _is_user_module(text: str) -> bool:
    return "triton_heuristics" not in text and ("@triton.jit" in text or "@jit" in text)


def _caller_passes(ctx: RewriteContext) -> set[str]:
    match = _MARKER.search(ctx.original.text) or _MARKER.search(ctx.module.text)
    return {n.strip() for n in match.group(1).split(",")} if match else set()


def _kernel(ctx: RewriteContext) -> Any:
    from ...userkernels.parse import parse_user_kernels

    try:
        return parse_user_kernels("<module>", ctx.module.text).function(ctx.module.name)
    except Exception:  # noqa: BLE001 - a module we cannot read is not ours to tune
        return None


def _pow2(value: Any) -> bool:
    return isinstance(value, int) and value > 0 and value & (value - 1) == 0


def _config_text(meta: dict[str, Any], warps: int | None, stages: int | None) -> str:
    body = ", ".join(f"'{k}': {v!r}" for k, v in meta.items())
    options = "".join(f", {name}={value}" for name, value in (("num_warps", warps), ("num_stages", stages))
                      if value is not None)
    return f"triton.Config({{{body}}}{options})"


class UserAutotuneFamily(RewriteFamily):
    name = "user_autotune"
    summary = ("autotune configs of a hand-written kernel: larger/smaller blocks and warp counts for the "
               "meta-parameters its wrapper does not pass")

    def _tunable(self, ctx: RewriteContext) -> tuple[Any, list[str]] | str:
        if not _is_user_module(ctx.module.text):
            return "an Inductor kernel (its launch configs are the launch_config family's)"
        kernel = _kernel(ctx)
        if kernel is None:
            return "the kernel cannot be read"
        passed = _caller_passes(ctx)
        if kernel.autotune is not None:
            if not kernel.autotune.configs_literal or not kernel.autotune.configs:
                return "its autotune configs are not a literal list"
            names = sorted({k for c in kernel.autotune.configs for k, v in c.kwargs.items()
                            if _pow2(v) and k not in passed})
            return (kernel, names) if names else "no power-of-two block size in its autotune configs"
        names = [p for p in kernel.constexprs if p not in passed and _pow2(kernel.constexpr_defaults.get(p))
                 and p not in kernel.heuristics]
        return (kernel, names) if names else "every meta-parameter is passed by the wrapper (it owns the launch)"

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        found = self._tunable(ctx)
        return found if isinstance(found, str) else None

    def variants(self, ctx: RewriteContext) -> list[Rewrite]:
        found = self._tunable(ctx)
        if isinstance(found, str):
            return []
        kernel, names = found
        if kernel.autotune is not None:
            base = [(dict(c.kwargs), c.num_warps, c.num_stages) for c in kernel.autotune.configs]
        else:
            base = [({n: kernel.constexpr_defaults[n] for n in names}, None, None)]
        plans: list[tuple[str, list[tuple[dict[str, Any], int | None, int | None]]]] = []

        def scaled(factor: float) -> list[tuple[dict[str, Any], int | None, int | None]]:
            out = []
            for meta, warps, stages in base:
                new = dict(meta)
                for n in names:
                    if _pow2(new.get(n)):
                        new[n] = max(1, int(new[n] * factor))
                out.append((new, warps, stages))
            return out

        larger, largest, smaller = scaled(2), scaled(4), scaled(0.5)
        if ctx.on_cpu:  # the interpreter pays per program: fewer, larger programs first
            plans += [("blocks x4", largest), ("blocks x2", larger), ("blocks x2 and x4", larger + largest)]
        else:
            plans += [("blocks /2, x1, x2", smaller + base + larger), ("blocks x2", larger),
                      ("blocks x1 and x2 with 8 warps", base + [(m, 8, s) for m, _, s in base + larger]),
                      ("blocks /2", smaller)]
        out: list[Rewrite] = []
        seen = {ctx.module.text}
        for title, configs in plans:
            unique: list[tuple[dict[str, Any], int | None, int | None]] = []
            for item in configs:
                if item not in unique and all(_pow2(item[0].get(n)) for n in names if n in item[0]):
                    unique.append(item)
            source = self._with_configs(ctx, kernel, unique)
            if source is None or source in seen:
                continue
            seen.add(source)
            labels = "; ".join(_config_text(*c) for c in unique)
            out.append(Rewrite(self.name, f"autotune {title}", f"autotune over {labels}", source,
                               {"configs": [{**m, "num_warps": w, "num_stages": s} for m, w, s in unique]}))
        return out

    def _with_configs(self, ctx: RewriteContext, kernel: Any,
                      configs: list[tuple[dict[str, Any], int | None, int | None]]) -> str | None:
        text = ctx.module.text
        listing = "[\n        " + ",\n        ".join(_config_text(*c) for c in configs) + ",\n    ]"
        tree = ast.parse(text)
        func = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == kernel.name), None)
        if func is None:
            return None
        lines = text.splitlines(keepends=True)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))
        for deco in func.decorator_list:
            if isinstance(deco, ast.Call) and (ast.unparse(deco.func).endswith("autotune")):
                node = next((kw.value for kw in deco.keywords if kw.arg == "configs"),
                            deco.args[0] if deco.args else None)
                if node is None:
                    return None
                assert node.end_lineno is not None and node.end_col_offset is not None  # ast.parse sets both
                start = offsets[node.lineno - 1] + node.col_offset
                end = offsets[node.end_lineno - 1] + node.end_col_offset
                return text[:start] + listing + text[end:]
        addressing = {n for a in kernel.accesses for n in a.params}  # pointers and strides
        sizes = [p for p in kernel.runtime_params if p not in addressing]
        first = min([d.lineno for d in func.decorator_list] + [func.lineno]) - 1
        decorator = f"@triton.autotune(configs={listing}, key={sizes!r})\n"
        return "".join(lines[:first]) + decorator + "".join(lines[first:])


_DIVISION = re.compile(r"^(?P<indent>\s*)(?P<target>\w+)\s*=\s*(?P<num>\w+)\s*/\s*(?P<den>\w+)\s*$")


class UserFastMathFamily(RewriteFamily):
    name = "user_fast_math"
    summary = "exp/log through exp2/log2, and one reciprocal instead of a division per element"

    def _rewrites(self, text: str) -> dict[str, str]:
        variants: dict[str, str] = {}
        exp2 = re.sub(r"\btl\.exp\(", "_ko_exp2(", text)
        exp2 = re.sub(r"\btl\.log\(", "_ko_log2(", exp2)
        if exp2 != text:
            exp2 = _expand(exp2, "_ko_exp2(", "tl.exp2(", f" * {LOG2E})")
            exp2 = _expand(exp2, "_ko_log2(", "(tl.log2(", f") * {LN2})")
            variants["exp and log through exp2/log2"] = exp2
        statistics = {m.group(1) for m in re.finditer(r"^\s*(\w+)\s*=\s*tl\.(?:sum|max|min)\(", text, re.MULTILINE)}
        lines = text.splitlines(keepends=True)
        changed = False
        for i, line in enumerate(lines):
            match = _DIVISION.match(line.rstrip("\n"))
            if match and match.group("den") in statistics:
                indent, den = match.group("indent"), match.group("den")
                lines[i] = (f"{indent}{match.group('target')} = {match.group('num')} * (1.0 / {den})\n")
                changed = True
        if changed:
            reciprocal = "".join(lines)
            variants["one reciprocal per row statistic"] = reciprocal
            if "exp and log through exp2/log2" in variants:
                both = variants["exp and log through exp2/log2"]
                for line in both.splitlines(keepends=True):
                    match = _DIVISION.match(line.rstrip("\n"))
                    if match and match.group("den") in statistics:
                        both = both.replace(line, f"{match.group('indent')}{match.group('target')} = "
                                                  f"{match.group('num')} * (1.0 / {match.group('den')})\n", 1)
                variants["exp2 and a reciprocal"] = both
        return variants

    def not_applicable(self, ctx: RewriteContext) -> str | None:
        if not _is_user_module(ctx.module.text):
            return "an Inductor kernel (its math is the fast_math family's)"
        return None if self._rewrites(ctx.module.text) else "no tl.exp/tl.log and no division by a row statistic"

    def applicable_variants(self, ctx: RewriteContext) -> list[Rewrite]:
        return [Rewrite(self.name, title, "same math through cheaper instructions", source, {"variant": title})
                for title, source in self._rewrites(ctx.module.text).items() if source != ctx.module.text]


def _expand(text: str, marker: str, opening: str, closing: str) -> str:
    """Replace ``marker(args)`` by ``opening + args + closing`` (matching parentheses)."""
    while True:
        start = text.find(marker)
        if start < 0:
            return text
        depth, index = 0, start + len(marker) - 1
        for index in range(start + len(marker) - 1, len(text)):
            if text[index] == "(":
                depth += 1
            elif text[index] == ")":
                depth -= 1
                if depth == 0:
                    break
        inner = text[start + len(marker):index]
        text = text[:start] + opening + inner + closing + text[index + 1:]


__all__ = ["UserAutotuneFamily", "UserFastMathFamily"]
