"""What the shell hands the features besides their own services: the lifecycle hooks, and the
interfaces one feature offers the others (so no feature imports another's class, or the shell).

Each feature module declares the rest of what it needs as a small ``...Context`` dataclass of
its own; the shell (``server.py``) fills them in.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Protocol

Hook = Callable[[], Awaitable[None] | None]


class Lifecycle:
    """Hooks the shell runs when the settings were (re)read and when the server shuts down."""

    def __init__(self) -> None:
        self._on_settings: list[Hook] = []
        self._on_shutdown: list[Hook] = []

    def on_settings(self, hook: Hook) -> None:
        """After ``initialized`` and after each settings change."""
        self._on_settings.append(hook)

    def on_shutdown(self, hook: Hook) -> None:
        """At ``shutdown``, in the order registered."""
        self._on_shutdown.append(hook)

    async def settings_changed(self) -> None:
        await _run(self._on_settings)

    async def shutdown(self) -> None:
        await _run(self._on_shutdown)


async def _run(hooks: list[Hook]) -> None:
    for hook in hooks:
        result = hook()
        if inspect.isawaitable(result):
            await result


class Republish(Protocol):
    """The diagnostics feature, as the others see it: publish a document's diagnostics again."""

    async def refresh(self, uri: str) -> None:
        """Now."""

    def schedule(self, uri: str, delay: float) -> None:
        """After ``delay`` seconds (a later call for the same document replaces it)."""

    async def refresh_graph(self, graph_path: str) -> None:
        """A graph's (or kernel file's) diagnostics and every document's lenses: new results came."""
