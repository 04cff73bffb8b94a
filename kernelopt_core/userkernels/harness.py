"""How KernelOPT runs a user kernel: the harness, the user's way.

A harness is named by text (``--harness``, a ``# kernelopt: harness=...`` comment in the
kernel's file, or the language server's ``harnesses`` setting):

* ``NAME``: a zero-argument function of the kernel's file returning ``(callable, inputs)``; the
  run is ``callable(*inputs)``;
* ``path/to/problem.py``: a KernelBench-format problem whose model calls the user's wrapper; the
  run is ``Model(*get_init_inputs())(*get_inputs())``, model and inputs on the task's device;
* ``path/to/file.py::NAME``: a harness function in another file, or, when ``NAME`` starts with
  ``test``, a pytest test function without arguments (the run is the test; passing is not raising).

:func:`resolve_spec` is pure; :class:`LoadedHarness` runs only in a worker or a candidate
process (it imports the user's modules and torch).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .model import UserKernelFile

HarnessKind = Literal["function", "problem", "pytest"]
SPEC_SEED = 0  # the callable (a model's parameters) is built under this seed in every process
_IDENT = re.compile(r"^[A-Za-z_]\w*$")


class HarnessError(ValueError):
    """The harness cannot be found or does not have the expected shape; the message says which."""


@dataclass(frozen=True)
class HarnessSpec:
    kind: HarnessKind
    file: str  # absolute path of the file holding the harness
    name: str | None  # the function (None for a problem file)
    text: str  # as the user wrote it

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HarnessSpec:
        return cls(kind=data["kind"], file=data["file"], name=data.get("name"), text=data.get("text", ""))

    def describe(self) -> str:
        base = os.path.basename(self.file)
        if self.kind == "problem":
            return f"KernelBench problem {base}"
        if self.kind == "pytest":
            return f"test {base}::{self.name}"
        return f"{self.name}() in {base}"


def resolve_spec(text: str, kernel_file: str, cwd: str | None = None) -> HarnessSpec:
    """Read a harness name against the kernel's file (relative paths: its folder, then ``cwd``)."""
    text = text.strip()
    if not text:
        raise HarnessError("the harness name is empty")
    kernel_file = os.path.abspath(kernel_file)
    if _IDENT.match(text):
        return HarnessSpec("function", kernel_file, text, text)
    path, sep, name = text.partition("::")
    if sep and not _IDENT.match(name):
        raise HarnessError(f"harness {text!r}: after '::' comes a function name, got {name!r}")
    if not path.endswith(".py"):
        raise HarnessError(f"harness {text!r}: give a function name of {os.path.basename(kernel_file)}, a problem "
                           "file (problem.py) or file.py::function")
    found = _find_file(path, kernel_file, cwd)
    if not sep:
        return HarnessSpec("problem", found, None, text)
    base = os.path.basename(found)
    is_test = name.startswith("test") and (base.startswith("test_") or base.endswith("_test.py"))
    return HarnessSpec("pytest" if is_test else "function", found, name, text)


def harness_advice(file: UserKernelFile, kernel: str, tried: str | None = None) -> str:
    """What to do when ``kernel`` has no harness, or ``tried`` (a harness function of the file) never
    launches it: the file's zero-argument functions that return (callable, inputs) and reach a launch of
    the kernel (read from the source), else how to write one."""
    base = os.path.basename(file.path)
    default = file.default_harness
    skipped = default if default and default != tried and file.launches(default, kernel) is False else None
    note = f"the file's harness {skipped} never launches {kernel}; " if skipped else ""
    choices = [name for name in file.harness_choices(kernel) if name != tried]
    if choices:
        which = " and ".join(f"{name}()" for name in choices)
        return (f"{note}{which} in {base} return{'s' if len(choices) == 1 else ''} (callable, inputs) and "
                f"launch{'es' if len(choices) == 1 else ''} {kernel}: pass --harness {choices[0]}, or write "
                f"`# kernelopt: harness={choices[0]}` right above the kernel")
    return (f"{note}pass --harness NAME (a zero-argument function of {base} that returns (callable, inputs) "
            f"and launches {kernel}), --harness problem.py (a KernelBench problem), or write "
            "`# kernelopt: harness=NAME` right above the kernel")


def _find_file(path: str, kernel_file: str, cwd: str | None) -> str:
    candidates = [path] if os.path.isabs(path) else [os.path.join(os.path.dirname(kernel_file), path),
                                                      os.path.join(cwd or os.getcwd(), path)]
    for candidate in candidates:
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    raise HarnessError(f"harness file {path} not found (looked in {', '.join(os.path.dirname(c) or '.' for c in candidates)})")


def natural_module(path: str) -> tuple[str, str]:
    """(folder to put on sys.path, dotted module name) a file would be imported as: packages with an
    ``__init__.py`` keep their dotted name, so the harness and the kernel share one module object."""
    path = os.path.abspath(path)
    folder, base = os.path.split(path)
    parts = [os.path.splitext(base)[0]]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        folder, package = os.path.split(folder)
        parts.insert(0, package)
    return folder, ".".join(parts)


def import_user_module(path: str, fresh: bool = True) -> Any:
    """Import a user file under its natural name; ``fresh`` runs it again (the file may have changed,
    or another file of the same name was imported before)."""
    folder, name = natural_module(path)
    if folder in sys.path:
        sys.path.remove(folder)
    sys.path.insert(0, folder)
    if fresh:
        sys.modules.pop(name, None)
        importlib.invalidate_caches()
    module = importlib.import_module(name)
    found = os.path.abspath(getattr(module, "__file__", "") or "")
    if found != os.path.abspath(path):
        raise HarnessError(f"importing {name} gave {found}, not {path}: another module of that name comes first "
                           "on sys.path")
    return module


# --- worker side ------------------------------------------------------------------------------------


class LoadedHarness:
    """The user's kernel module and harness, imported; ``make(seed)`` gives (callable, inputs)."""

    def __init__(self, spec: HarnessSpec, kernel_file: str, kernel: str, device: str):
        self.spec = spec
        self.kernel_file = os.path.abspath(kernel_file)
        self.kernel_name = kernel
        self.device = device
        self.kernel_module = import_user_module(self.kernel_file)
        if not hasattr(self.kernel_module, kernel):
            raise HarnessError(f"{self.kernel_file} defines no {kernel} when imported")
        self.harness_module = self.kernel_module if spec.file == self.kernel_file else import_user_module(spec.file)
        self._callable: Any = None
        self._first_inputs: list[Any] | None = None

    @property
    def kernel_object(self) -> Any:
        return getattr(self.kernel_module, self.kernel_name)

    def _call_factory(self) -> tuple[Any, list[Any]]:
        import torch

        module = self.harness_module
        if self.spec.kind == "problem":
            for attr in ("Model", "get_inputs", "get_init_inputs"):
                if not hasattr(module, attr):
                    raise HarnessError(f"{self.spec.file} is not a KernelBench problem: it has no {attr}")
            model = module.Model(*module.get_init_inputs())
            if isinstance(model, torch.nn.Module):
                model = model.to(self.device).eval()
            inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
            return model, inputs
        function = getattr(module, self.spec.name or "", None)
        if not callable(function):
            raise HarnessError(f"{self.spec.file} has no function {self.spec.name}")
        if self.spec.kind == "pytest":
            return function, []
        result = function()
        if not (isinstance(result, (tuple, list)) and len(result) == 2 and callable(result[0])):
            raise HarnessError(f"harness {self.spec.name}() must return (callable, inputs); it returned "
                               f"{type(result).__name__}")
        fn, inputs = result
        if isinstance(inputs, dict):
            raise HarnessError(f"harness {self.spec.name}() returned its inputs as a dict; return a tuple or list "
                               "(the callable is called with them positionally)")
        inputs = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
        return fn, inputs

    @property
    def callable(self) -> Any:
        """The callable, built once under :data:`SPEC_SEED` (a model's parameters are the same in every process)."""
        if self._callable is None:
            with _seeded(SPEC_SEED):
                self._callable, _ = self._call_factory()
            if not callable(self._callable):
                raise HarnessError("the harness gave something that is not callable")
        return self._callable

    def make_inputs(self, seed: int) -> list[Any]:
        """The inputs for ``seed``: the harness's own draw under that seed, redrawn when the harness
        seeds itself (so that different seeds do give different inputs)."""
        _ = self.callable
        with _seeded(seed):
            _, inputs = self._call_factory()
        if seed != SPEC_SEED:
            if self._first_inputs is None:
                with _seeded(SPEC_SEED):
                    _, self._first_inputs = self._call_factory()
            if _same_values(inputs, self._first_inputs):
                inputs = _redraw(inputs, seed)
        return inputs

    def run(self, inputs: list[Any]) -> Any:
        return self.callable(*inputs)

    def float64_reference(self) -> Any:
        """A callable(inputs) -> outputs that runs the original in float64, or raises HarnessError."""
        import copy

        import torch

        if self.spec.kind == "pytest":
            raise HarnessError("a test returns no outputs to compare")
        target = self.callable
        if isinstance(target, torch.nn.Module):
            target = copy.deepcopy(target).double()

        def reference(inputs: list[Any]) -> Any:
            cast = [x.detach().double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                    for x in inputs]
            out = target(*cast)
            items = out if isinstance(out, (tuple, list)) else [out]
            low = [str(t.dtype) for t in items if isinstance(t, torch.Tensor) and t.is_floating_point()
                   and t.dtype != torch.float64]
            if low:
                raise HarnessError(f"the harness does not compute in float64 (it returned {', '.join(low)} on "
                                   "float64 inputs)")
            return out

        return reference


class _seeded:
    def __init__(self, seed: int):
        self.seed = seed

    def __enter__(self) -> None:
        import torch

        torch.manual_seed(self.seed)

    def __exit__(self, *exc: object) -> None:
        return None


def _same_values(a: list[Any], b: list[Any]) -> bool:
    import torch

    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(x, y):
                return False
        elif isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            return False
    return True


def _redraw(inputs: list[Any], seed: int) -> list[Any]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    out = []
    for value in inputs:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            fresh = torch.randn(value.shape, generator=generator, dtype=torch.float64).to(value.dtype)
            out.append(fresh.to(value.device))
        else:
            out.append(value)
    return out


__all__ = ["HarnessError", "HarnessSpec", "LoadedHarness", "harness_advice", "import_user_module", "natural_module",
           "resolve_spec"]
