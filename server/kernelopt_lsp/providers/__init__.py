"""Who answers for a document: the kernel providers the editor features ask in turn.

A provider (Inductor dumps, a project's own ``@triton.jit`` files) claims the documents it reads
and answers for them: diagnostics, the hover, code lenses and code actions. The features ask
:class:`Providers` for a document's answers; the first provider that claims it wins, so a feature
never asks which kind of file it is looking at. A new kind of kernel file is one more provider,
added to the list the shell builds (``server.py``).
"""

from __future__ import annotations

from .base import DocumentAnswers, KernelProvider, Providers

__all__ = ["DocumentAnswers", "KernelProvider", "Providers"]
