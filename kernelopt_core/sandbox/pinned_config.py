"""A loaded Inductor kernel pinned to one launch config, with no tuning on its first launch.

The worker sends the config the baseline graph tuned the original to, for a candidate that keeps the
original's decorators (:mod:`..gates.tuned_config`); the candidate's process restricts the kernel's
launchers to it here. Triton is imported inside the function only.
"""

from __future__ import annotations

from typing import Any

# Config fields kept beside its keyword arguments (Triton's Config), when set.
OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def _config_key(config: Any) -> tuple[Any, ...]:
    return (tuple(sorted((getattr(config, "kwargs", {}) or {}).items())), *(getattr(config, o, None) for o in OPTIONS))


PINNED = "pinned to the original's tuned config"


def _unpinnable(kernel: Any, kwargs: Any) -> str | None:
    """Why ``kernel`` cannot take a config of ``kwargs`` (None: it can)."""
    launchers = getattr(kernel, "launchers", None)
    configs = getattr(kernel, "configs", None) or [getattr(launcher, "config", None) for launcher in launchers or []]
    if not isinstance(launchers, list) or not isinstance(getattr(kernel, "inductor_meta", None), dict) \
            or not isinstance(kwargs, dict) or not configs:
        return "not pinned: not an Inductor kernel with configs"
    if any(set(getattr(config, "kwargs", {}) or {}) != set(kwargs) for config in configs):
        return "not pinned: the original's config names other parameters than the candidate's configs"
    return None


def _config(tuned: dict[str, Any]) -> Any:
    import triton

    return triton.Config(dict(tuned["kwargs"]), **{o: tuned[o] for o in OPTIONS if isinstance(tuned.get(o), int)})


def load_pinned(name: str, source: str, tuned: dict[str, Any]) -> tuple[Any, str] | None:
    """The Inductor kernel ``name`` of ``source`` compiled for ``tuned`` alone: its other configs are never
    compiled (each is a compile of its own, seconds for a reduction's list). None where it cannot be loaded
    that way here (already loaded in this process, not an Inductor kernel, a compile that fails): the caller
    loads it as Inductor does and pins it after (:func:`pin_config`)."""
    try:
        from torch._inductor.codecache import PyCodeCache

        kernel = getattr(PyCodeCache.load(source), name)
    except Exception:  # noqa: BLE001 - the usual load reports what is wrong with the source
        return None
    if getattr(kernel, "launchers", None) or _unpinnable(kernel, tuned.get("kwargs")) is not None:
        return None
    saved = kernel.configs, kernel.inductor_meta
    try:
        kernel.configs = [_config(tuned)]
        kernel.inductor_meta = {**kernel.inductor_meta, "coordinate_descent_tuning": False}
        if not getattr(kernel, "triton_interpret", False):  # the interpreter compiles nothing
            kernel.precompile()
    except Exception:  # noqa: BLE001 - left as it was found, for the usual load
        kernel.configs, kernel.inductor_meta = saved
        kernel.launchers = []
        return None
    return kernel, PINNED + " (compiled alone)"


def pin_config(kernel: Any, tuned: dict[str, Any]) -> str:
    """Restrict a loaded Inductor kernel to the config ``tuned`` (compiled here when it is not among its
    own, as coordinate descent does) with no tuning on its first launch. Returns what was done, for the
    reply; a kernel it cannot pin keeps tuning as before (the reason is returned)."""
    why = _unpinnable(kernel, tuned.get("kwargs"))
    if why is not None:
        return why
    try:
        config = _config(tuned)
    except Exception as exc:  # noqa: BLE001 - options this Triton does not take: the kernel tunes itself
        return f"not pinned: the original's config is not one this Triton takes ({type(exc).__name__})"
    if getattr(kernel, "triton_interpret", False):  # the interpreter runs the first config, no launchers
        kernel.configs = [config]
        return PINNED
    wanted = _config_key(config)
    same = [launcher for launcher in kernel.launchers if _config_key(launcher.config) == wanted]
    if same:
        launcher = same[0]
    else:
        try:
            launcher = kernel._precompile_config(config).make_launcher()
        except Exception as exc:  # noqa: BLE001 - a config this Triton cannot build: the kernel tunes itself
            return f"not pinned: the original's config does not compile here ({type(exc).__name__})"
    kernel.launchers = [launcher]
    kernel.inductor_meta = {**kernel.inductor_meta, "coordinate_descent_tuning": False}
    return PINNED + ("" if same else " (compiled here)")


__all__ = ["OPTIONS", "PINNED", "load_pinned", "pin_config"]
