"""Write files so a reader, or a crash, sees the old content or the new, never half of it.

The run journal's companions, the accepted-kernel store, caches and campaign results all write
through here: a temporary file in the same folder, then ``os.replace``. ``durable`` also fsyncs
the file and its folder, for records that must survive a power cut (runs, the store).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def fsync_dir(path: str | Path) -> None:
    """Make a rename or a new file in ``path`` durable (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _current_umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; done once, at import
    os.umask(mask)
    return mask


# mkstemp creates its file 0600; the result must have the mode a plain open() gives (0644 under the
# usual umask), or the user's own tools and colleagues cannot read run folders and stores.
_FILE_MODE = 0o666 & ~_current_umask()


def write_text_atomic(path: str | Path, text: str, *, durable: bool = True) -> None:
    folder = Path(path).parent
    folder.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    if durable:
        fsync_dir(folder)


def write_json_atomic(path: str | Path, data: Any, *, durable: bool = True, sort_keys: bool = False) -> None:
    write_text_atomic(path, json.dumps(data, indent=1, default=str, sort_keys=sort_keys) + "\n", durable=durable)
