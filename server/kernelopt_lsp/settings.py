"""The ``kernelopt`` settings section (docs/lsp-contract.md), read and checked.

Settings come from ``initializationOptions`` and ``workspace/configuration``. A bad value never
stops the server: it keeps the previous (or default) value and the problem is reported in words
that name the key.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace
from typing import Any

from kernelopt_core.search.deadline import DEFAULT_BUDGET_S

PROVIDERS = ("anthropic", "vertex", "offline")
_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class BeamSettings:
    width: int = 4
    iterations: int = 5
    plans: int = 4
    retries: int = 4


@dataclass(frozen=True)
class Settings:
    dump_folders: tuple[str, ...] = ()
    provider: str = "offline"
    model: str = "claude-sonnet-4-6"
    api_key_env: str = "ANTHROPIC_API_KEY"
    beam: BeamSettings = field(default_factory=BeamSettings)
    device: str = "auto"
    ncu_path: str = "ncu"
    interpreter: str = ""  # empty: jobs use the server's own Python
    allow_config_changes: bool = False  # optimize verifies a recommended torch.compile configuration change
    budget: float = DEFAULT_BUDGET_S  # seconds an optimize job plans against (0: no limit), as `optimize --budget`
    # A project's own kernels: (file or file::kernel, absolute) -> harness (docs/user-kernels.md)
    harnesses: tuple[tuple[str, str], ...] = ()
    user_kernels: bool = True  # serve the @triton.jit kernels of any Python file, not only Inductor dumps

    def harness_for(self, path: str, kernel: str) -> str | None:
        """The harness the ``harnesses`` setting names for a kernel (file::kernel first, then the file)."""
        found = dict(self.harnesses)
        return found.get(f"{os.path.abspath(path)}::{kernel}") or found.get(os.path.abspath(path))


def unwrap_section(raw: Any) -> Any:
    """initializationOptions may hold the section itself or ``{"kernelopt": {...}}``."""
    if isinstance(raw, dict) and isinstance(raw.get("kernelopt"), dict):
        return raw["kernelopt"]
    return raw


def parse_settings(raw: Any, base: Settings | None = None,
                   root: str | None = None) -> tuple[Settings, list[str]]:
    """Read a settings object over ``base``. Returns the settings and the problems found.

    Relative ``dumpFolders`` and ``interpreter`` paths are taken against ``root`` (the first
    workspace folder). Keys may be nested (``{"beam": {"width": 2}}``) or dotted (``"beam.width"``).
    """
    settings = base or Settings()
    problems: list[str] = []
    raw = unwrap_section(raw)
    if raw is None:
        return settings, problems
    if not isinstance(raw, dict):
        return settings, [f"kernelopt settings must be an object, got {type(raw).__name__}"]
    values = _flatten(raw)
    changes: dict[str, Any] = {}
    beam_changes: dict[str, int] = {}

    if "dumpFolders" in values:
        folders = values["dumpFolders"]
        if isinstance(folders, str):
            folders = [folders]
        if not isinstance(folders, list) or not all(isinstance(f, str) for f in folders):
            problems.append("kernelopt.dumpFolders must be a list of folder paths")
        else:
            resolved = []
            for folder in folders:
                path = _resolve(folder, root)
                if os.path.isdir(path):
                    resolved.append(path)
                else:
                    why = "is not a folder" if os.path.exists(path) else "does not exist"
                    problems.append(f"kernelopt.dumpFolders: {folder!r} {why}; it is not watched")
            changes["dump_folders"] = tuple(resolved)
    if "provider" in values:
        provider = values["provider"]
        if provider not in PROVIDERS:
            problems.append(f"kernelopt.provider must be one of {', '.join(PROVIDERS)}; got {provider!r}")
        else:
            changes["provider"] = provider
    for key, attr in (("model", "model"), ("ncuPath", "ncu_path")):
        if key in values:
            value = values[key]
            if not isinstance(value, str) or not value.strip():
                problems.append(f"kernelopt.{key} must be a non-empty string; got {value!r}")
            else:
                changes[attr] = value.strip()
    if "apiKeyEnv" in values:
        value = values["apiKeyEnv"]
        if not isinstance(value, str) or not _ENV_NAME.match(value):
            problems.append(f"kernelopt.apiKeyEnv must be an environment variable name; got {value!r}")
        else:
            changes["api_key_env"] = value
    for key in ("width", "iterations", "plans", "retries"):
        full = f"beam.{key}"
        if full in values:
            value = values[full]
            low = 1  # the optimize command takes at least one of each (retries: attempts per plan)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 64:
                problems.append(f"kernelopt.{full} must be a whole number from {low} to 64; got {value!r}")
            else:
                beam_changes[key] = value
    if "device" in values:
        value = values["device"]
        if not isinstance(value, str) or not _DEVICE.match(value.strip()):
            problems.append(f"kernelopt.device must be auto, cpu or cuda:N; got {value!r}")
        else:
            changes["device"] = value.strip()
    if "interpreter" in values:
        value = values["interpreter"]
        if not isinstance(value, str):
            problems.append(f"kernelopt.interpreter must be a path to a Python interpreter; got {value!r}")
        elif not value.strip():
            changes["interpreter"] = ""
        else:
            path = _resolve(value.strip(), root)
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                problems.append(f"kernelopt.interpreter: {value!r} is not an executable file; "
                                "jobs keep using the server's own Python")
            else:
                changes["interpreter"] = path
    for key, attr in (("allowConfigChanges", "allow_config_changes"), ("userKernels", "user_kernels")):
        if key in values:
            value = values[key]
            if not isinstance(value, bool):
                problems.append(f"kernelopt.{key} must be true or false; got {value!r}")
            else:
                changes[attr] = value
    if "budget" in values:
        value = values["budget"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            problems.append(f"kernelopt.budget must be a number of seconds (0: no limit); got {value!r}")
        else:
            changes["budget"] = float(value)
    if "harnesses" in values:
        value = values["harnesses"]
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) and v.strip()
                                                  for k, v in value.items()):
            problems.append("kernelopt.harnesses must map a file (or file::kernel) to a harness name; "
                            f"got {value!r}")
        else:
            entries = []
            for key, harness in value.items():
                file, sep, kernel = key.partition("::")
                entries.append((_resolve(file, root) + (f"::{kernel}" if sep else ""), harness.strip()))
            changes["harnesses"] = tuple(entries)
    if beam_changes:
        changes["beam"] = replace(settings.beam, **beam_changes)
    unknown = sorted(k for k in values if k not in KNOWN_KEYS and not k.startswith(CLIENT_KEY_PREFIXES))
    if unknown:
        problems.append(f"unknown kernelopt setting(s) ignored: {', '.join(unknown)}")
    return replace(settings, **changes), problems


# Every key the server reads. A client that contributes a setting the server does not know (VS Code
# sends the whole section) makes every start warn "unknown setting": tests compare this with the VS Code
# extension's package.json.
KNOWN_KEYS = frozenset({
    "dumpFolders", "provider", "model", "apiKeyEnv", "beam.width", "beam.iterations", "beam.plans",
    "beam.retries", "device", "ncuPath", "interpreter", "allowConfigChanges", "harnesses", "budget",
    "userKernels",
})
# The clients' own settings under the section, accepted and not read: the LSP trace (`trace.server`).
CLIENT_KEY_PREFIXES = ("trace",)


def _flatten(raw: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and name == "beam":
            flat.update(_flatten(value, "beam."))
        elif isinstance(value, dict) and name == "trace":
            continue  # the client's own setting (kernelopt.trace.server)
        else:
            flat[name] = value
    return flat


def _resolve(path: str, root: str | None) -> str:
    path = os.path.expanduser(path)
    if not os.path.isabs(path) and root:
        path = os.path.join(root, path)
    return os.path.abspath(path)
