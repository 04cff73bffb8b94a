"""What a kernel module may reach: every allowed module and, for each, the names it may take from it.

Gate 1 resolves every name of a candidate to a qualified name (``tl.load`` ->
``triton.language.load``) and looks it up here. The member lists of the Triton language,
``triton_helpers`` and ``libdevice`` are read from the installed packages' source files with
:mod:`ast`, never by importing them (gate 1 also runs where torch must not be imported); when a file
is not found, the snapshot in :mod:`._kernel_names_snapshot` is used and
:attr:`KernelNamespace.notes` says so.

Allowed: ``triton.language`` (less I/O and placement-dependent calls), ``triton_helpers``' own jit
functions, a few ``triton`` names, Inductor's launch decorators and hints, Python's pure ``math``,
and, in launcher modules only, ``torch``'s allocators and dtypes. The list and why:
docs/design-notes.md, "gates/static_names.py".
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

# Kinds of member: where a resolved name may be used.
MODULE = "module"  # a namespace: only its members may be used
DEVICE = "device"  # Triton language, libdevice, triton_helpers: inside @triton.jit bodies
HOST_INT = "host-int"  # triton.cdiv / next_power_of_2: jit bodies, launchers, grids, heuristics
DECORATOR = "decorator"  # triton.jit / autotune / heuristics, triton_heuristics.<kind>
CONFIG = "config"  # triton.Config: inside @triton.autotune(configs=[...]) only
DRIVER = "driver"  # triton_helpers.set_driver_to_gpu/cpu: a module-level statement only
ENUM = "enum"  # ReductionHint.INNER, ...: decorator arguments
DEVICE_PROPERTIES = "device-properties"  # hints.DeviceProperties(...): decorator arguments
MATH_VALUE = "math-value"  # math.pi, ...
MATH_FUNCTION = "math-function"  # math.sqrt, ...: on constants
SCRATCH = "scratch"  # torch.empty, ...: launchers only
DTYPE = "dtype"  # torch.float32, ...: launchers only

TRITON = "triton"
TL = "triton.language"
TL_MATH = "triton.language.math"
TL_EXTRA = "triton.language.extra"
LIBDEVICE = "triton.language.extra.libdevice"
CUDA = "triton.language.extra.cuda"
CUDA_LIBDEVICE = "triton.language.extra.cuda.libdevice"
RUNTIME = "torch._inductor.runtime"
HELPERS = "torch._inductor.runtime.triton_helpers"
HEURISTICS = "torch._inductor.runtime.triton_heuristics"
HINTS = "torch._inductor.runtime.hints"
MATH = "math"
TORCH = "torch"

_TOP_LEVEL_DEF = re.compile(r"^def ([A-Za-z_]\w*)\(", re.M)
HEURISTIC_DECORATORS = frozenset({"pointwise", "reduction", "persistent_reduction", "template", "fixed_config",
                                  "user_autotune", "split_scan", "cooperative_reduction", "foreach"})
HINT_ENUMS = ("ReductionHint", "TileHint", "AutotuneHint")
TL_DENIED = frozenset({"device_print", "static_print", "target_info"})
CUDA_DENIED = frozenset({"globaltimer", "smid"})
MATH_VALUES = frozenset({"pi", "e", "inf", "nan", "tau"})
MATH_FUNCTIONS = frozenset({
    "sqrt", "log", "log2", "log10", "log1p", "exp", "exp2", "expm1", "floor", "ceil", "trunc", "fabs", "pow",
    "isinf", "isnan", "isfinite", "copysign", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh",
    "cosh", "tanh", "erf", "erfc", "gcd", "lcm", "fmod", "hypot", "ldexp", "prod", "fsum",
})
# torch dtype name -> Triton signature type (launchers allocate scratch of these dtypes).
TORCH_DTYPES: dict[str, str] = {
    "float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
    "float64": "fp64", "double": "fp64", "int8": "i8", "int16": "i16", "int32": "i32", "int": "i32",
    "int64": "i64", "long": "i64", "uint8": "u8", "bool": "i1", "float8_e4m3fn": "fp8e4nv",
    "float8_e5m2": "fp8e5",
}


@dataclass(frozen=True)
class Member:
    kind: str
    target: str  # the canonical qualified name (for a MODULE member: the module it is)


@dataclass
class KernelNamespace:
    """Every allowed module (canonical qualified name) and the members it may give."""

    modules: dict[str, dict[str, Member]] = field(default_factory=dict)
    importable: frozenset[str] = frozenset()  # modules an import statement may name
    origin: dict[str, str] = field(default_factory=dict)  # member list -> the file it came from, or "snapshot"
    notes: list[str] = field(default_factory=list)

    def member(self, module: str, name: str) -> Member | None:
        return self.modules.get(module, {}).get(name)

    def is_module(self, qualified: str) -> bool:
        return qualified in self.modules


# --- reading the installed packages without importing them ---------------------------------------


def package_dir(name: str) -> Path | None:
    """The folder of a top-level package, found without importing it (None when absent)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) if locations else None


def _parse(path: Path | None) -> ast.Module | None:
    if path is None or not path.is_file():
        return None
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None


def _statements(body: Iterable[ast.stmt]) -> Iterable[ast.stmt]:
    """Module-level statements, including those under module-level if/try (version switches)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _statements(node.body)
            yield from _statements(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _statements(node.body)
            for handler in node.handlers:
                yield from _statements(handler.body)
            yield from _statements(node.orelse)


def _decorator_names(func: ast.FunctionDef) -> list[str]:
    return [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in func.decorator_list]


def defined_functions(tree: ast.Module, decorated_by: frozenset[str] | None = None) -> set[str]:
    """Public module-level ``def`` names (``decorated_by``: only those with one of these decorators)."""
    out = set()
    for node in _statements(tree.body):
        if isinstance(node, ast.FunctionDef):
            if decorated_by is None:
                if not node.name.startswith("_"):
                    out.add(node.name)
            elif set(_decorator_names(node)) & decorated_by:
                out.add(node.name)
    return out


def dunder_all(tree: ast.Module) -> set[str] | None:
    for node in _statements(tree.body):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError):
                return None
            if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                return set(value)
    return None


def enum_members(tree: ast.Module, class_name: str) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return {t.id for stmt in node.body if isinstance(stmt, ast.Assign) for t in stmt.targets
                    if isinstance(t, ast.Name) and t.id.isupper()}
    return set()


def read_member_lists(torch_dir: Path | None, triton_dir: Path | None) -> tuple[dict[str, set[str]], dict[str, str]]:
    """The member lists found in the installed sources, and the file each came from."""
    lists: dict[str, set[str]] = {}
    origin: dict[str, str] = {}
    trees: dict[Path | None, ast.Module | None] = {}

    def take(key: str, path: Path | None, read: Callable[[ast.Module], set[str] | None]) -> None:
        if path not in trees:
            trees[path] = _parse(path)
        tree = trees[path]
        value = read(tree) if tree is not None else None
        if value:
            lists[key] = set(value)
            origin[key] = str(path)

    def take_defs(key: str, path: Path | None) -> None:
        # libdevice files are long lists of plain defs: a line scan is 50x faster than a parse
        try:
            text = path.read_text(encoding="utf-8") if path is not None else ""
        except (OSError, UnicodeDecodeError):
            text = ""
        names = {n for n in _TOP_LEVEL_DEF.findall(text) if not n.startswith("_")}
        if names:
            lists[key] = names
            origin[key] = str(path)

    tl_dir = triton_dir / "language" if triton_dir else None
    runtime = torch_dir / "_inductor" / "runtime" if torch_dir else None
    take(TL, tl_dir / "__init__.py" if tl_dir else None, dunder_all)
    take_defs(TL_MATH, tl_dir / "math.py" if tl_dir else None)
    take_defs(LIBDEVICE, tl_dir / "extra" / "libdevice.py" if tl_dir else None)
    take(CUDA, tl_dir / "extra" / "cuda" / "__init__.py" if tl_dir else None, dunder_all)
    take_defs(CUDA_LIBDEVICE, tl_dir / "extra" / "cuda" / "libdevice.py" if tl_dir else None)
    take(HELPERS, runtime / "triton_helpers.py" if runtime else None,
         lambda t: defined_functions(t, frozenset({"triton.jit", "triton_builtin"})))
    for enum in HINT_ENUMS:
        take(f"{HINTS}.{enum}", runtime / "hints.py" if runtime else None,
             functools.partial(enum_members, class_name=enum))
    return lists, origin


def build_namespace(torch_dir: Path | None, triton_dir: Path | None) -> KernelNamespace:
    """The allowed namespace from these package folders (None: not installed), snapshot where missing."""
    from ._kernel_names_snapshot import SNAPSHOT, SNAPSHOT_VERSIONS

    lists, origin = read_member_lists(torch_dir, triton_dir)
    notes = []
    missing = sorted(set(SNAPSHOT) - set(lists))
    for key in missing:
        lists[key] = set(SNAPSHOT[key])
        origin[key] = "snapshot"
    if missing:
        notes.append(f"the installed sources of {', '.join(missing)} were not found; gate 1 used the checked-in "
                     f"list ({SNAPSHOT_VERSIONS}) for them")

    ns = KernelNamespace(origin=origin, notes=notes)
    mods = ns.modules
    mods[TRITON] = {
        "jit": Member(DECORATOR, "triton.jit"), "autotune": Member(DECORATOR, "triton.autotune"),
        "heuristics": Member(DECORATOR, "triton.heuristics"), "Config": Member(CONFIG, "triton.Config"),
        "cdiv": Member(HOST_INT, "triton.cdiv"), "next_power_of_2": Member(HOST_INT, "triton.next_power_of_2"),
        "language": Member(MODULE, TL),
    }
    mods[TL] = {name: Member(DEVICE, f"{TL}.{name}") for name in lists[TL] - TL_DENIED - {"math", "extra"}}
    mods[TL]["math"] = Member(MODULE, TL_MATH)
    mods[TL]["extra"] = Member(MODULE, TL_EXTRA)
    mods[TL_MATH] = {name: Member(DEVICE, f"{TL_MATH}.{name}") for name in lists[TL_MATH]}
    mods[TL_EXTRA] = {"libdevice": Member(MODULE, LIBDEVICE), "cuda": Member(MODULE, CUDA)}
    mods[LIBDEVICE] = {name: Member(DEVICE, f"{LIBDEVICE}.{name}") for name in lists[LIBDEVICE]}
    mods[CUDA] = {name: Member(DEVICE, f"{CUDA}.{name}") for name in lists[CUDA] - CUDA_DENIED - {"libdevice"}}
    mods[CUDA]["libdevice"] = Member(MODULE, CUDA_LIBDEVICE)
    mods[CUDA_LIBDEVICE] = {name: Member(DEVICE, f"{CUDA_LIBDEVICE}.{name}") for name in lists[CUDA_LIBDEVICE]}
    mods[RUNTIME] = {"triton_helpers": Member(MODULE, HELPERS), "triton_heuristics": Member(MODULE, HEURISTICS),
                     "hints": Member(MODULE, HINTS)}
    mods[HELPERS] = {name: Member(DEVICE, f"{HELPERS}.{name}") for name in lists[HELPERS]}
    # triton_helpers' own aliases (triton_compat picks them for the installed Triton).
    mods[HELPERS]["libdevice"] = Member(MODULE, LIBDEVICE)
    mods[HELPERS]["math"] = Member(MODULE, TL_MATH)
    for driver in ("set_driver_to_gpu", "set_driver_to_cpu"):
        mods[HELPERS][driver] = Member(DRIVER, f"{HELPERS}.{driver}")
    mods[HEURISTICS] = {name: Member(DECORATOR, f"{HEURISTICS}.{name}") for name in HEURISTIC_DECORATORS}
    mods[HINTS] = {enum: Member(MODULE, f"{HINTS}.{enum}") for enum in HINT_ENUMS}
    mods[HINTS]["DeviceProperties"] = Member(DEVICE_PROPERTIES, f"{HINTS}.DeviceProperties")
    for enum in HINT_ENUMS:
        key = f"{HINTS}.{enum}"
        mods[key] = {name: Member(ENUM, f"{key}.{name}") for name in lists[key]}
    mods[MATH] = {name: Member(MATH_VALUE, f"math.{name}") for name in MATH_VALUES}
    mods[MATH].update({name: Member(MATH_FUNCTION, f"math.{name}") for name in MATH_FUNCTIONS})
    from ..launchers import SCRATCH_FUNCTIONS

    mods[TORCH] = {name: Member(SCRATCH, f"torch.{name}") for name in SCRATCH_FUNCTIONS}
    mods[TORCH].update({name: Member(DTYPE, f"torch.{name}") for name in TORCH_DTYPES})
    ns.importable = frozenset({TRITON, TL, TL_MATH, TL_EXTRA, LIBDEVICE, CUDA, CUDA_LIBDEVICE, RUNTIME, HELPERS,
                               HEURISTICS, HINTS, MATH, TORCH})
    return ns


@functools.lru_cache(maxsize=1)
def kernel_namespace() -> KernelNamespace:
    """The namespace of the installed torch and triton (read once per process)."""
    return build_namespace(package_dir("torch"), package_dir("triton"))


def snapshot_text(torch_dir: Path | None = None, triton_dir: Path | None = None) -> str:
    """The source of :mod:`._kernel_names_snapshot` for the installed packages (to refresh it)."""
    from importlib.metadata import PackageNotFoundError, version

    torch_dir = torch_dir or package_dir("torch")
    triton_dir = triton_dir or package_dir("triton")
    lists, _ = read_member_lists(torch_dir, triton_dir)
    try:
        versions = f"torch {version('torch')}, triton {version('triton')}"
    except PackageNotFoundError:
        versions = "unknown versions"
    lines = ['"""Member lists of the kernel namespace, read from the installed sources by',
             "``python -m kernelopt_core.gates.static_names`` (gate 1's fallback when they are not installed)."
             '"""', "", f"SNAPSHOT_VERSIONS = {versions!r}", "", "SNAPSHOT: dict[str, tuple[str, ...]] = {"]
    for key in sorted(lists):
        names = sorted(lists[key])
        lines.append(f"    {key!r}: (")
        row = "       "
        for name in names:
            item = f" {name!r},"
            if len(row) + len(item) > 110:
                lines.append(row)
                row = "       "
            row += item
        lines.append(row)
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    target = Path(__file__).with_name("_kernel_names_snapshot.py")
    target.write_text(snapshot_text(), encoding="utf-8")
    print(f"wrote {target}")
