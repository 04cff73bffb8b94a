"""The provider interface and the list that asks providers in turn (the first claim wins)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from lsprotocol import types

from kernelopt_core.job_runner import Job


class DocumentAnswers(Protocol):
    """What one provider answers for one document it claimed."""

    @property
    def version(self) -> int | None:
        """The document version the answers were built from (None: the file as saved)."""

    def diagnostics(self) -> dict[str, list[types.Diagnostic]]:
        """The document's diagnostics by source; a source left out keeps what was published."""

    def hover(self, line: int, col: int, line_text: str) -> types.Hover | None:
        """The hover at a position (``line_text``: that line, without its line break)."""

    def lenses(self, active_jobs: list[Job]) -> list[types.CodeLens]:
        """Code lenses for every kernel of the document."""

    async def actions(self, params: types.CodeActionParams, active_jobs: list[Job]) -> list[types.CodeAction]:
        """Code actions at the requested range."""


class _Versioned(Protocol):
    @property
    def version(self) -> int | None: ...


ProviderT = TypeVar("ProviderT")
StateT = TypeVar("StateT", bound=_Versioned)


class ClaimedDocument(Generic[ProviderT, StateT]):
    """A document a provider claimed: the provider, the document's uri, and the state its answers come from."""

    def __init__(self, provider: ProviderT, uri: str, state: StateT) -> None:
        self.provider = provider
        self.uri = uri
        self.state = state

    @property
    def version(self) -> int | None:
        return self.state.version


class KernelProvider(Protocol):
    """One kind of kernel file."""

    async def claim(self, uri: str) -> DocumentAnswers | None:
        """The answers for a document of this kind, or None when the document is not one."""


class Providers:
    """The providers in the order they are asked; the first one that claims a document answers for it."""

    def __init__(self, providers: Sequence[KernelProvider]) -> None:
        self.providers = tuple(providers)

    async def document(self, uri: str) -> DocumentAnswers | None:
        for provider in self.providers:
            answers = await provider.claim(uri)
            if answers is not None:
                return answers
        return None
