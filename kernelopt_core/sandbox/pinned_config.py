"""A loaded Inductor kernel pinned to one launch config, with no tuning on its first launch.

The worker sends the config the baseline graph tuned the original to, for a candidate that keeps the
original's decorators (:mod:`..gates.tuned_config`); the candidate's process restricts the kernel's
launchers to it here. Triton is imported inside the function only.
"""

from __future__ import annotations

from typing import Any

# Config fields kept beside its keyword arguments (Triton's Config), when set.
OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def _key(kwargs: dict[str, Any], options: dict[str, Any]) -> tuple[Any, ...]:
    return (tuple(sorted(kwargs.items())), *(options.get(o) for o in OPTIONS))


def _config_key(config: Any) -> tuple[Any, ...]:
    return _key(dict(getattr(config, "kwargs", {}) or {}), {o: getattr(config, o, None) for o in OPTIONS})


def pin_config(kernel: Any, tuned: dict[str, Any]) -> str:
    """Restrict a loaded Inductor kernel to the config ``tuned`` (compiled here when it is not among its
    own, as coordinate descent does) with no tuning on its first launch. Returns what was done, for the
    reply; a kernel it cannot pin keeps tuning as before (the reason is returned)."""
    launchers = getattr(kernel, "launchers", None)
    meta = getattr(kernel, "inductor_meta", None)
    configs = getattr(kernel, "configs", None) or [getattr(launcher, "config", None) for launcher in launchers or []]
    kwargs = tuned.get("kwargs")
    if not isinstance(launchers, list) or not isinstance(meta, dict) or not isinstance(kwargs, dict) or not configs:
        return "not pinned: not an Inductor kernel with configs"
    if any(set(getattr(config, "kwargs", {}) or {}) != set(kwargs) for config in configs):
        return "not pinned: the original's config names other parameters than the candidate's configs"
    options = {o: tuned[o] for o in OPTIONS if isinstance(tuned.get(o), int)}
    try:
        import triton

        config = triton.Config(dict(kwargs), **options)
    except Exception as exc:  # noqa: BLE001 - options this Triton does not take: the kernel tunes itself
        return f"not pinned: the original's config is not one this Triton takes ({type(exc).__name__})"
    if getattr(kernel, "triton_interpret", False):  # the interpreter runs the first config, no launchers
        kernel.configs = [config]
        return "pinned to the original's tuned config"
    wanted = _key(kwargs, options)
    same = [launcher for launcher in launchers if _config_key(launcher.config) == wanted]
    if same:
        launcher = same[0]
    else:
        try:
            launcher = kernel._precompile_config(config).make_launcher()
        except Exception as exc:  # noqa: BLE001 - a config this Triton cannot build: the kernel tunes itself
            return f"not pinned: the original's config does not compile here ({type(exc).__name__})"
    kernel.launchers = [launcher]
    kernel.inductor_meta = {**meta, "coordinate_descent_tuning": False}
    return "pinned to the original's tuned config" + ("" if same else " (compiled here)")


__all__ = ["OPTIONS", "pin_config"]
