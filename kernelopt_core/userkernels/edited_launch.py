"""A launch-site edit of a user kernel: the launch an edited copy of the user's file makes.

``kernelopt verify FILE.py --candidate EDITED.py`` where EDITED.py is a copy of FILE.py whose kernel is
unchanged and whose launch differs (``BLOCK = 128`` in the wrapper, another grid or ``num_warps``)
verifies the edited launch: gate 2 repeats the launch the edited wrapper makes on the original's
captured arguments and compares it with the original launch; gates 3-4 run the harness with the edited
copy in place of the file. The edited copy is the user's code, not the checker's: it is imported only
in the candidate's contained process, where :func:`capture_plan` runs (named by the checker through
the process's ``call`` command). :func:`plan_mismatch` is pure.
"""

from __future__ import annotations

from typing import Any

CAPTURE_PLAN = "kernelopt_core.userkernels.edited_launch:capture_plan"


def capture_plan(kernel_file: str, kernel: str, harness: dict[str, Any], device: str, params: list[str],
                 constexprs: list[str]) -> dict[str, Any]:
    """Run the harness of the edited copy ``kernel_file`` once on its seed-0 inputs and return the launch
    plan of its first launch of ``kernel`` (JSON; raises when the harness never launches it)."""
    from .capture import capture_launches, launch_plan
    from .harness import HarnessSpec, LoadedHarness
    from .runtime import prepare_kernel

    loaded = LoadedHarness(HarnessSpec.from_json(harness), kernel_file, kernel, device)
    prepare_kernel(loaded.kernel_object)
    capture, _ = capture_launches(loaded, loaded.make_inputs(0))
    if not capture.launches:
        raise RuntimeError(f"the harness with the edited file never launched {kernel}")
    return launch_plan(capture.launches[0], params, constexprs)


def plan_mismatch(original: dict[str, Any], edited: dict[str, Any]) -> str | None:
    """How the edited launch's runtime arguments differ from the original's (None: the same tensors, by
    dtype, shape and stride, and the same runtime scalars, in the same order), in words."""
    old, new = original.get("arguments") or [], edited.get("arguments") or []
    if len(old) != len(new):
        return f"{len(new)} runtime argument(s) instead of {len(old)}"
    for a, b in zip(old, new, strict=True):
        name = a.get("param") or b.get("param") or "?"
        if a.get("kind") != b.get("kind"):
            return f"{name} is a {b.get('kind')} instead of a {a.get('kind')}"
        if a.get("kind") == "tensor":
            for key in ("dtype", "shape", "stride"):
                if a.get(key) != b.get(key):
                    return f"{name}: {key} {b.get(key)} instead of {a.get(key)}"
        elif a.get("value") != b.get("value"):
            return f"{name} = {b.get('value')!r} instead of {a.get('value')!r}"
    return None


__all__ = ["CAPTURE_PLAN", "capture_plan", "plan_mismatch"]
