"""Which folders a worker sees read-only or not at all (the engine side of the sandbox).

Read-only for solutions: the dataset (definitions, workloads, traces, blobs), the reference
cache, and the kit's own code (``fib_core/`` and ``scripts/`` beside it), which the next run's
launcher and judge import: a solution rewriting it would own the next verdicts. Hidden: the
folder of the cache's signing key. The build cache stays writable (solutions
are compiled there); when it lies inside the dataset, the dataset stays writable rather than
break builds.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.resolve().relative_to(parent.resolve())
        return True
    except ValueError:
        return False


def worker_paths(dataset_root: Any) -> tuple[list[str], list[str]]:
    """(read-only folders, hidden folders) for a worker of a run over ``dataset_root``."""
    from fib_core.bench.integrity import ensure_key, key_dir
    from fib_core.paths import cache_dir

    cache = cache_dir()
    refs = cache / "reference"
    keys = key_dir(cache)
    ensure_key(cache)
    readonly: list[str] = []
    try:
        refs.mkdir(parents=True, exist_ok=True)
        readonly.append(str(refs.resolve()))
    except OSError:
        pass
    if dataset_root is not None:
        root = Path(dataset_root)
        if root.is_dir() and not _inside(cache, root):
            readonly.append(str(root.resolve()))
    readonly += [str(folder) for folder in kit_code_folders() if not _inside(cache, folder)]
    hidden = [str(keys.resolve())] if keys.is_dir() else []
    return readonly, [h for h in hidden if os.path.isdir(h)]


def kit_code_folders() -> list[Path]:
    """The kit's own code a run executes: the ``fib_core`` package and its ``scripts/``
    folder. Example: ``kit_code_folders()[0].name == "fib_core"``."""
    from fib_core.paths import kit_root

    root = kit_root()
    return [f for f in (root / "fib_core", root / "scripts") if f.is_dir()]
