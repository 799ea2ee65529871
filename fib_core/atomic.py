"""Atomic file writes: the kit's one way to replace a file.

Every file the kit writes that another process or a later run reads (traces, results pages,
apply tables, cached references and their signatures, the cache's signing key) is written to
a temp file in the same folder, flushed to disk, and moved over the target with one rename.
A crash or a full disk leaves the old file or the new one, never half of either, and a reader
never sees a partial file. The temp file is created private to the user (mode 0600), which
the rename keeps.

Example::

    from fib_core.atomic import atomic_write_text
    atomic_write_text(Path("out/results.json"), text)
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def atomic_write(path: Path, write: Callable[[Path], Any]) -> None:
    """Produce ``path`` by ``write(tmp)`` on a temp file beside it, then one rename.

    ``write`` gets the temp file's path (for writers that open files themselves, such as
    safetensors). The folder is created when missing; on any failure the temp file is
    removed and the error raised, and ``path`` keeps its old content.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_text(path: Path, data: str) -> None:
    """Replace ``path`` with ``data`` (UTF-8) atomically (see :func:`atomic_write`)."""
    atomic_write_bytes(path, data.encode("utf-8"))
