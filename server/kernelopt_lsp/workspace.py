"""The project the editor has open: its folders, its open documents, and where jobs and the
accepted-kernel store live for a file in it."""

from __future__ import annotations

import os

from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument


class ProjectWorkspace:
    def __init__(self, server: LanguageServer) -> None:
        self._server = server

    def roots(self) -> list[str]:
        """The workspace folders (or the root path of a client without folders), absolute."""
        roots: list[str] = []
        try:
            workspace = self._server.workspace
        except RuntimeError:  # before initialize
            return roots
        for folder in workspace.folders.values():
            path = to_fs_path(folder.uri)
            if path:
                roots.append(os.path.abspath(path))
        if not roots and workspace.root_path:
            roots.append(os.path.abspath(workspace.root_path))
        return roots

    def document(self, uri: str) -> TextDocument | None:
        """The open document (as the client holds it now), None when the file is not open."""
        return self._server.workspace.text_documents.get(uri)

    def lines(self, uri: str) -> list[str]:
        """The document's lines: as the client holds it when open, else as saved."""
        return list(self._server.workspace.get_text_document(uri).lines)

    def job_cwd(self, path: str) -> str:
        """Jobs run in the workspace folder holding the file, so runs land in its .kernelopt/."""
        roots = self.roots()
        for root in sorted(roots, key=len, reverse=True):
            if path.startswith(root.rstrip(os.sep) + os.sep):
                return root
        return roots[0] if roots else os.path.dirname(path)

    def accepted_store_dir(self, dump_path: str) -> str | None:
        """The store beside a dump's workspace (None: KERNELOPT_ACCEPTED_DIR or the default)."""
        if os.environ.get("KERNELOPT_ACCEPTED_DIR"):
            return None
        return os.path.join(self.job_cwd(dump_path), ".kernelopt", "accepted")
