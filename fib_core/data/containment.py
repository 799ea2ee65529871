"""Paths that must stay inside a folder: dataset blobs, packed sources, merged files.

Datasets and solution folders are files a contestant did not necessarily write. A relative path
that climbs out with ``..``, an absolute path, or a symbolic link whose target lies elsewhere
would make the kit read (and copy, or pack into a submission) any file of the machine.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath


def relative_path_problem(path: str) -> str | None:
    """Why ``path`` cannot name a file inside its base folder (None when it can).

    Lexical only (no file system access), so it also checks paths of files not yet present.
    """
    if "\0" in path:
        return "a NUL byte"
    posix = path.replace("\\", "/")
    if posix.startswith("/") or (len(posix) > 1 and posix[1] == ":"):
        return "an absolute path"
    depth = 0
    for part in PurePosixPath(posix).parts:
        if part == "..":
            depth -= 1
            if depth < 0:
                return "a path that climbs out of its folder"
        elif part != ".":
            depth += 1
    return None


def is_lexically_inside(path: Path, root: Path) -> bool:
    """True when the absolute ``path`` is ``root`` or below it, ``..`` folded, links not followed."""
    inside = os.path.normpath(Path(path).absolute())
    base = os.path.normpath(Path(root).absolute())
    return os.path.commonpath([inside, base]) == base


def link_escape(path: Path, root: Path) -> Path | None:
    """The real target of ``path`` when a symbolic link (of the file or a folder on the way)
    takes it outside ``root``; None when it stays inside."""
    real = Path(os.path.realpath(path))
    real_root = Path(os.path.realpath(root))
    if real == real_root or real_root in real.parents:
        return None
    return real
