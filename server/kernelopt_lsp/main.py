"""Entry point of ``kernelopt-lsp`` (filled in by the language-server issue)."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    raise SystemExit("kernelopt-lsp: the language server is not built yet")
