"""The candidate process: loads one candidate and runs what its checker asks, nothing more.

Forked by :mod:`kernelopt_core.sandbox.zygote` and restricted by :mod:`.policy` before any candidate
code is imported, it talks to its checker over one authenticated Unix socket, in JSON both ways
(never pickle), so nothing the candidate does can make the checker run code. Tensors cross as
guarded, poisoned exchange buffers (:mod:`.exchange`) that this process only maps and launches on.

Commands (``{"command": ..., ...}`` -> ``{"ok": bool, ...}``): ``load_kernel``, ``run_kernel``,
``load_graph``, ``make_inputs``, ``run_graph``, ``repeat``, ``memory``, ``release``, ``shutdown``,
``warm`` (what any candidate's first load pays, done ahead by a spare process) and ``call`` (a
function named ``"package.module:function"``, as gate 1's sm_90 compile runs). What each does:
docs/design-notes.md, "sandbox/child.py". Runs only inside a candidate process (imports torch).
"""

from __future__ import annotations

import json
import os
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from .exchange import SharedRef, TensorView, open_shared, share_tensor, view_of
from .policy import ContainmentReport

MAX_MESSAGE_BYTES = 64 << 20


@dataclass
class _State:
    device: str
    scratch: str
    report: ContainmentReport
    kernels: dict[str, Any] = field(default_factory=dict)
    graph: Any = None
    input_sets: dict[int, list[Any]] = field(default_factory=dict)
    buffers: dict[str, Any] = field(default_factory=dict)  # mapped exchange buffers by identity
    kept: list[Any] = field(default_factory=list)  # tensors handed back, alive until released
    flush: Any = None
    violations: list[str] = field(default_factory=list)


class CandidateFailure(Exception):
    """Candidate code raised; ``violation`` marks an attempt the sandbox refused."""

    def __init__(self, message: str, violation: bool = False):
        super().__init__(message)
        self.violation = violation


def _describe(exc: BaseException) -> str:
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:  # noqa: BLE001 - a candidate's exception may even fail to print
        text = type(exc).__name__
    return text[:3000]


def _is_violation(exc: BaseException) -> bool:
    """A refused file write or socket: what the sandbox turns those into."""
    import errno

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, PermissionError) or (
                isinstance(current, OSError) and current.errno in (errno.EACCES, errno.EPERM)):
            return True
        current = current.__cause__ or current.__context__
    return False


def _candidate(call: Any, what: str) -> Any:
    try:
        return call()
    except BaseException as exc:  # noqa: BLE001 - everything a candidate raises is its verdict
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise CandidateFailure(f"{what}: the candidate tried to exit the process ({_describe(exc)})") from None
        raise CandidateFailure(f"{what}: {_describe(exc)}", violation=_is_violation(exc)) from None


# --- tensors -----------------------------------------------------------------------------------


def _buffer(state: _State, ref: SharedRef) -> Any:
    key = ref.path or json.dumps(ref.ipc)[:512]
    mapped = state.buffers.get(key)
    if mapped is None:
        mapped = state.buffers[key] = open_shared(ref)
    return mapped


def _arguments(state: _State, refs: list[dict[str, Any]], values: list[Any]) -> list[Any]:
    shared = [SharedRef.from_json(r) for r in refs]
    out: list[Any] = []
    for value in values:
        if isinstance(value, dict) and "view" in value:
            view = TensorView.from_json(value["view"])
            out.append(view_of(_buffer(state, shared[view.buffer]), view))
        else:
            out.append(value)
    return out


def _kwargs(state: _State, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The launch's keyword arguments, with this process's own current stream where one is asked for."""
    out = dict(kwargs)
    if out.get("stream") == "__current_stream__":
        if state.device.startswith("cuda"):
            import torch

            out["stream"] = torch._C._cuda_getCurrentRawStream(torch.device(state.device).index or 0)
        else:
            out["stream"] = 0
    return out


def _synchronize(state: _State) -> None:
    if state.device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


# --- kernels -----------------------------------------------------------------------------------


def _load_kernel(state: _State, message: dict[str, Any]) -> dict[str, Any]:
    from ..launchers import is_launcher_source, load_launcher

    name, source = str(message["name"]), str(message["source"])
    device_str = str(message.get("device_str") or ("cuda" if state.device.startswith("cuda") else "cpu"))

    tuned = message.get("tuned_config")
    pinned: list[str] = []

    def load() -> Any:
        if is_launcher_source(source, name):
            return load_launcher(name, source, device_str, directory=os.path.join(state.scratch, "launchers"))
        if isinstance(tuned, dict):  # only the original's tuned config compiled, where that can be done
            from .pinned_config import load_pinned

            alone = load_pinned(name, source, tuned)
            if alone is not None:
                pinned.append(alone[1])
                return alone[0]
        from torch._inductor.async_compile import AsyncCompile

        kernel = AsyncCompile().triton(name, source, device_str)
        return kernel.result() if hasattr(kernel, "result") else kernel

    # ``key``: the name to run it by, when it is not the kernel's own (gate 2's instrumented copy of a candidate)
    key = str(message.get("key") or name)
    state.kernels[key] = _candidate(load, f"loading {key}")
    reply: dict[str, Any] = {"launcher": bool(getattr(state.kernels[key], "is_launcher", False))}
    if pinned:
        reply["tuned"] = pinned[0]
    elif isinstance(tuned, dict) and not reply["launcher"]:
        from .pinned_config import pin_config

        reply["tuned"] = pin_config(state.kernels[key], tuned)
    return reply


class _ScratchGuard:
    """While active, the launcher's scratch comes from guarded, poisoned allocations."""

    def __init__(self, device: str):
        self.device = device
        self.allocations: list[Any] = []
        self._saved: dict[str, Any] = {}

    def _restored(self) -> Any:
        import torch

        guard = self

        class _Restored:
            def __enter__(self) -> None:
                self.patched = {name: getattr(torch, name) for name in guard._saved}
                for name, original in guard._saved.items():
                    setattr(torch, name, original)

            def __exit__(self, *exc: object) -> None:
                for name, patched in self.patched.items():
                    setattr(torch, name, patched)

        return _Restored()

    def __enter__(self) -> _ScratchGuard:
        import torch

        from .guarded_buffers import fill_poison, guarded_allocation

        def make(name: str, zero: bool) -> Any:
            original = getattr(torch, name)

            def allocate(*args: Any, **kwargs: Any) -> Any:
                with self._restored():  # our own allocations use the real functions
                    like = original(*args, **kwargs)  # resolves shapes, dtypes and devices as torch does
                    guarded = guarded_allocation(tuple(like.size()), like.dtype, like.device)
                    if zero:
                        guarded.view.zero_()
                    else:
                        fill_poison(guarded.view)
                self.allocations.append((name, guarded))
                return guarded.view

            return allocate

        kinds = (("empty", False), ("empty_like", False), ("zeros", True), ("zeros_like", True))
        for name, _ in kinds:
            self._saved[name] = getattr(torch, name)
        for name, zero in kinds:
            setattr(torch, name, make(name, zero))
        return self

    def __exit__(self, *exc: object) -> None:
        import torch

        for name, original in self._saved.items():
            setattr(torch, name, original)

    def problems(self) -> list[str]:
        out = []
        for index, (name, guarded) in enumerate(self.allocations):
            if not guarded.guard_intact():
                out.append(f"wrote outside its scratch buffer {index} (torch.{name}, shape "
                           f"{tuple(guarded.view.shape)}): the scratch's guard region changed")
        return out


def _run_kernel(state: _State, message: dict[str, Any]) -> dict[str, Any]:
    name = str(message["name"])
    kernel = state.kernels.get(name)
    if kernel is None:
        raise ValueError(f"kernel {name} is not loaded")
    args = _arguments(state, message.get("refs", []), message.get("args", []))
    kwargs = _kwargs(state, message.get("kwargs") or {})
    shuffle = message.get("shuffle_seed")
    launcher = bool(getattr(kernel, "is_launcher", False))
    guard = _ScratchGuard(state.device) if launcher else None

    def launch() -> None:
        from contextlib import nullcontext

        from ..backends.cpu_triton import shuffled_program_order

        order = shuffled_program_order(int(shuffle)) if shuffle is not None and not state.device.startswith(
            "cuda") else nullcontext()
        with order, (guard if guard is not None else nullcontext()):
            kernel.run(*args, **kwargs)
            _synchronize(state)

    begin = time.perf_counter()
    _candidate(launch, f"running {name}")
    reply: dict[str, Any] = {"seconds": time.perf_counter() - begin}
    if guard is not None:
        reply["scratch_problems"] = guard.problems()
        reply["scratch_bytes"] = sum(g.flat.numel() * g.flat.element_size() for _, g in guard.allocations)
    return reply


# --- graphs ------------------------------------------------------------------------------------


def _load_graph(state: _State, message: dict[str, Any]) -> dict[str, Any]:
    from ..graph_module import load_graph_module

    path = str(message["path"])
    state.graph = _candidate(lambda: load_graph_module(path, state.device, module_name="kernelopt_sandboxed_graph"),
                             "loading the re-stitched graph")
    return {}


def _make_inputs(state: _State, message: dict[str, Any]) -> dict[str, Any]:
    from ..graph_module import make_inputs

    for seed in message.get("seeds", []):
        state.input_sets[int(seed)] = make_inputs(state.graph, seed=int(seed))
    return {"sets": sorted(state.input_sets)}


def _graph_inputs(state: _State, message: dict[str, Any]) -> list[Any]:
    if "input_set" in message:
        return list(state.input_sets[int(message["input_set"])])
    return _arguments(state, message.get("refs", []), message.get("args", []))


def _run_graph(state: _State, message: dict[str, Any]) -> dict[str, Any]:
    import torch

    if state.graph is None:
        raise ValueError("no graph is loaded")
    inputs = _graph_inputs(state, message)

    def call() -> Any:
        out = state.graph.call(list(inputs))
        _synchronize(state)
        return out

    out = _candidate(call, "running the re-stitched graph")
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    refs: list[dict[str, Any]] = []
    outputs: list[Any] = []
    folder = os.path.join(state.scratch, "outputs")
    os.makedirs(folder, exist_ok=True)
    for item in items:
        if not isinstance(item, torch.Tensor):
            outputs.append({"value": item if isinstance(item, (int, float, bool, str, type(None))) else repr(item)})
            continue
        ref, view, keep = share_tensor(item, folder)
        state.kept.append(keep)
        view.buffer = len(refs)
        refs.append(ref.to_json())
        outputs.append({"view": view.to_json()})
    return {"refs": refs, "outputs": outputs}


def _flush_l2(state: _State) -> None:
    if not state.device.startswith("cuda"):
        return
    import torch

    if state.flush is None:
        from ..measure.timing import MIN_FLUSH_BYTES

        l2 = int(getattr(torch.cuda.get_device_properties(state.device), "L2_cache_size", 0) or 0)
        state.flush = torch.empty(max(2 * l2, MIN_FLUSH_BYTES), dtype=torch.int8, device=state.device)
    state.flush.zero_()


def _repeat(state: _State, message: dict[str, Any]) -> dict[str, Any]:
    """Run a kernel or the graph ``reps`` times (L2 flushed before each when asked), then sync."""
    reps = max(1, int(message.get("reps", 1)))
    flush = bool(message.get("flush_l2", True))
    if message.get("what") == "kernel":
        kernel = state.kernels[str(message["name"])]
        args = _arguments(state, message.get("refs", []), message.get("args", []))
        kwargs = _kwargs(state, message.get("kwargs") or {})

        def once(i: int) -> None:
            kernel.run(*args, **kwargs)
    else:
        sets = [list(state.input_sets[int(s)]) for s in message.get("input_sets", [])] or [
            _graph_inputs(state, message)]

        def once(i: int) -> None:
            state.graph.call(list(sets[i % len(sets)]))

    def run() -> None:
        for i in range(reps):
            if flush:
                _flush_l2(state)
            once(i)
        _synchronize(state)

    _candidate(run, "timing")
    return {}


def _memory(state: _State, message: dict[str, Any]) -> dict[str, Any]:
    if not state.device.startswith("cuda"):
        return {"peak_bytes": None}
    import torch

    peak = int(torch.cuda.max_memory_allocated())
    if message.get("reset"):
        torch.cuda.reset_peak_memory_stats()
    return {"peak_bytes": peak, "current_bytes": int(torch.cuda.memory_allocated())}


def _release(state: _State, message: dict[str, Any]) -> dict[str, Any]:
    state.kept.clear()
    if message.get("inputs"):
        state.input_sets.clear()
    if message.get("buffers"):
        state.buffers.clear()
        import gc

        gc.collect()  # a mapped buffer kept by a reference cycle could never be freed by the checker
    if state.device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return {}


# What every candidate's first load imports (the cpu and compile zygotes import them before they fork;
# a cuda child imports them itself, because on a GPU machine some ask the driver for its devices).
_WARM_MODULES = ("torch._inductor.async_compile", "torch._inductor.runtime.triton_heuristics",
                 "torch._inductor.codecache", "kernelopt_core.launchers", "kernelopt_core.graph_module",
                 "kernelopt_core.backends.cpu_triton", "kernelopt_core.sandbox.guarded_buffers")


def _warm(state: _State, message: dict[str, Any]) -> dict[str, Any]:
    """Candidate-independent warm-up: nothing here reads the candidate, and a failure is the checker's."""
    import importlib

    begin = time.perf_counter()
    for name in _WARM_MODULES:
        importlib.import_module(name)
    if state.device.startswith("cuda"):
        # A CUDA kernel's load keys its caches by hashes of torch's and Triton's sources (about a second
        # each) and launches through Triton's driver helpers: paid here once, as the compile zygote does.
        from triton.runtime import driver

        from .compiler_hashes import hash_the_compilers_once

        hash_the_compilers_once()
        active = driver.active
        active.get_current_target()
        getattr(active, "utils", None)  # builds or loads Triton's CUDA helper module (cached)
    return {"seconds": time.perf_counter() - begin}


def _named_function(path: str) -> Any:
    """The function at ``"package.module:function"`` (a dotted attribute path after the colon)."""
    import importlib

    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"{path!r} does not name a function as package.module:function")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"{path} is not callable")
    return target


def _call(state: _State, message: dict[str, Any]) -> dict[str, Any]:
    path = str(message.get("callable"))
    function = _named_function(path)  # a name the checker got wrong is the checker's failure
    kwargs = message.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise TypeError("call: kwargs must be an object")
    # What the function runs is candidate code (it may import the candidate's module).
    return {"result": _candidate(lambda: function(**kwargs), path)}


_COMMANDS = {"warm": _warm, "call": _call, "load_kernel": _load_kernel, "run_kernel": _run_kernel, "load_graph": _load_graph,
             "make_inputs": _make_inputs, "run_graph": _run_graph, "repeat": _repeat, "memory": _memory,
             "release": _release}


def _handle(state: _State, message: dict[str, Any]) -> dict[str, Any]:
    command = str(message.get("command", ""))
    if command == "hello":
        return {"ok": True, "containment": state.report.to_json(), "pid": os.getpid(), "device": state.device}
    handler = _COMMANDS.get(command)
    if handler is None:
        return {"ok": False, "error": f"unknown command {command!r}", "checker_error": True}
    try:
        return {"ok": True, **handler(state, message)}
    except CandidateFailure as failure:
        if failure.violation:
            state.violations.append(str(failure))
        return {"ok": False, "error": str(failure), "violation": failure.violation, "oom": "out of memory" in str(
            failure).lower()}
    except Exception as exc:  # noqa: BLE001 - the harness's own failure: the checker cannot verify
        oom = type(exc).__name__ == "OutOfMemoryError" or "out of memory" in str(exc).lower()
        return {"ok": False, "error": _describe(exc), "checker_error": True, "oom": oom,
                "traceback": traceback.format_exc()[-3000:]}


def serve(connection: Any, device: str, scratch: str, report: ContainmentReport) -> None:
    """Answer the checker's requests until it says shutdown or goes away."""
    state = _State(device=device, scratch=scratch, report=report)
    while True:
        try:
            raw = connection.recv_bytes(MAX_MESSAGE_BYTES)
        except (EOFError, OSError):
            return
        message = json.loads(raw)
        if message.get("command") == "shutdown":
            # Unmap the checker's buffers before answering: the checker kills this process once answered,
            # and a CUDA buffer still mapped by a killed process can never be freed by its owner.
            try:
                _release(state, {"inputs": True, "buffers": True})
            except Exception:  # noqa: BLE001 - a broken device must not stop the shutdown
                pass
            connection.send_bytes(b'{"ok": true}')
            return
        reply = _handle(state, message)
        try:
            data = json.dumps(reply)
        except (TypeError, ValueError) as exc:
            data = json.dumps({"ok": False, "error": f"reply not JSON-able: {exc}", "checker_error": True})
        connection.send_bytes(data.encode("utf-8"))


__all__ = ["serve"]
