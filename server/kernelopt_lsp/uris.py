"""``file:`` URIs and paths, both ways (every feature needs them; the shell is not where they live)."""

from __future__ import annotations

import os

from pygls.uris import from_fs_path, to_fs_path


def uri_path(uri: str) -> str | None:
    """The absolute path of a ``file:`` URI; None for any other scheme (an untitled buffer, a diff view)."""
    if not uri.startswith("file:"):
        return None
    path = to_fs_path(uri)
    return os.path.abspath(path) if path else None


def path_uri(path: str) -> str:
    return from_fs_path(path) or f"file://{path}"
