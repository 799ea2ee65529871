"""Atomic file writes: the kit's one way to replace a file.

Every file the kit writes that another process or a later run reads (traces, results pages,
apply tables, cached references and their signatures, the cache's signing key) is written to
a temp file in the same folder, flushed to disk, and moved over the target with one rename.
A crash or a full disk leaves the old file or the new one, never half of either, and a reader
never sees a partial file. A replaced file keeps its permission bits, a new one gets 0644
(0600 for secrets, with ``mode=``).

Example::

    from fib_core.atomic import atomic_write_text
    atomic_write_text(Path("out/results.json"), text)
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

NEW_FILE_MODE = 0o644


def atomic_write(path: Path, write: Callable[[Path], Any], *, mode: int | None = None) -> None:
    """Produce ``path`` by ``write(tmp)`` on a temp file beside it, then one rename.

    ``write`` gets the temp file's path (for writers that open files themselves, such as
    safetensors). ``mode`` sets the permission bits; without it a replaced file keeps its own
    and a new one gets 0644. The folder is created when missing; on any failure the temp file
    is removed and the error raised, and ``path`` keeps its old content.
    """
    path = Path(path)
    if path.is_dir():  # say so before the rename would name the temp file instead
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o777
        except OSError:
            mode = NEW_FILE_MODE
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        try:
            os.fchmod(fd, mode)  # mkstemp creates 0600; set the bits before any content lands
        finally:
            os.close(fd)
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda tmp: tmp.write_bytes(data), mode=mode)


def atomic_write_text(path: Path, data: str) -> None:
    """Replace ``path`` with ``data`` (UTF-8) atomically (see :func:`atomic_write`)."""
    atomic_write_bytes(path, data.encode("utf-8"))
