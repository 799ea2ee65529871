"""Which folders a worker sees read-only, writable or not at all (the engine side of the sandbox).

Read-only for solutions: the fork the kit runs from (its ``fib_core/`` and ``scripts/``, which
the next run's launcher and judge import; its root, which is first on their module path, so a
file planted there, ``json.py`` say, would be imported in place of the real one; the run
ledger and results kept there), the dataset (definitions, workloads, traces, blobs), the
reference cache, and what the run's processes import from (the Python environment, the base
installation, the per-user site-packages, ``PYTHONPATH`` folders). Hidden: the folder of the
cache's signing key. Writable again inside a read-only folder: what a worker must write, the
build cache (solutions are compiled there), Triton's cache, the system's temporary folder and
a profile folder. Such a folder that *is* a protected one, or that is reached through a
symbolic link into one, is refused (:class:`~fib_core.errors.ConfigError`): a solution may
have left that link in the home folder to have the next run open its target.
"""

from __future__ import annotations

import os
import site
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fib_core.bench.integrity import ensure_key, key_dir
from fib_core.errors import ConfigError
from fib_core.paths import CACHE_ENV, PROFILE_ENV, cache_dir, kit_root

# Folders (os.pathsep-separated) hidden from workers besides the signing key: a service that
# keeps several users' solutions and results in the dataset (``fib_core serve``) sets it.
HIDE_VAR = "FIB_HIDE_FROM_SOLUTIONS"

# Order of the sandbox's steps for folders at the same depth: opened, then protected, then
# hidden; a deeper folder's step comes after its parent's, so the most specific one wins.
_RANK = {"rw": 0, "ro": 1, "hide": 2}


@dataclass(frozen=True)
class Mounts:
    """What a worker's sandbox does to which folders (absolute, resolved paths).

    >>> Mounts(readonly=("/a",), writable=("/a/cache",), hidden=("/a/cache/keys",)).args()
    ['--mount', 'ro:/a', '--mount', 'rw:/a/cache', '--mount', 'hide:/a/cache/keys']
    """

    readonly: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()

    def ordered(self) -> list[tuple[str, str]]:
        """(kind, path) in the order the sandbox applies them: outer folders first."""
        steps = [("ro", p) for p in self.readonly] + [("rw", p) for p in self.writable] + \
            [("hide", p) for p in self.hidden]
        return sorted(steps, key=lambda s: (len(Path(s[1]).parts), _RANK[s[0]]))

    def args(self) -> list[str]:
        """The worker's command-line flags for them (``--mount kind:path``, in order)."""
        return [arg for kind, path in self.ordered() for arg in ("--mount", f"{kind}:{path}")]


def parse_mount(text: str) -> tuple[str, str]:
    """One ``--mount`` value: ``ro:PATH`` | ``rw:PATH`` | ``hide:PATH``.

    >>> parse_mount("ro:/data/x:y")
    ('ro', '/data/x:y')
    """
    kind, _, path = text.partition(":")
    if kind not in _RANK or not path:
        raise ValueError(f"not a mount: {text!r}")
    return kind, path


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.resolve().relative_to(parent.resolve())
        return True
    except ValueError:
        return False


def worker_mounts(dataset_root: Any) -> Mounts:
    """The sandbox of a worker of a run over ``dataset_root``: what :func:`protected_folders`
    names read-only, the folders a worker writes opened again where they lie inside one, the
    signing key hidden. ConfigError for a folder a worker must write that *is* a protected
    one, or is reached through a symbolic link into one (such a link may have been left by an
    earlier solution, to have its target opened)."""
    cache = cache_dir()
    keys = key_dir(cache)
    ensure_key(cache)
    readonly = protected_folders(dataset_root)
    opened: list[Path] = []
    for what, folder in _worker_scratch(cache):
        real = Path(os.path.realpath(folder))
        inside = [p for p in readonly if _inside(real, p)]
        if not inside:
            continue  # writable as it is
        if real in readonly:
            raise ConfigError(
                f"{what} ({folder}) is {real}, which solutions must not write to (the fork, the "
                "dataset, the Python installation or a PYTHONPATH folder); point it at a "
                "folder of its own")
        if real != Path(os.path.abspath(folder)):
            raise ConfigError(
                f"{what} ({folder}) is a symbolic link to {real}, inside {inside[-1]}, which "
                "solutions must not write to (an earlier solution may have made that link); "
                "remove the link or point the setting at a folder of its own")
        real.mkdir(parents=True, exist_ok=True)
        opened.append(real)
    hidden = [keys.resolve()] if keys.is_dir() else []
    hidden += [Path(p).resolve() for p in os.environ.get(HIDE_VAR, "").split(os.pathsep) if p]
    return Mounts(readonly=_unique(readonly), writable=_unique(opened),
                  hidden=_unique([h for h in hidden if h.is_dir()]))


def protected_folders(dataset_root: Any) -> list[Path]:
    """The folders a worker sees read-only (resolved): the reference cache, the dataset, the
    fork (:func:`fork_root`) or at least its ``fib_core/`` and ``scripts/``, and what the run's
    processes import from (the Python environment, the base interpreter's prefix, the per-user
    site-packages, the folders on ``PYTHONPATH``), each unless it is the home folder or holds it
    (or is the root)."""
    home = Path(os.path.expanduser("~")).resolve()
    refs = cache_dir() / "reference"
    found: list[Path] = []
    try:
        refs.mkdir(parents=True, exist_ok=True)
        found.append(refs.resolve())
    except OSError:
        pass
    if dataset_root is not None and Path(dataset_root).is_dir():
        found.append(Path(dataset_root).resolve())
    fork = fork_root()
    if fork is not None:
        found.append(fork)
    found += [f.resolve() for f in kit_code_folders()]
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE is not False else None
    # Where the run's processes import from: the user's PYTHONPATH folders come before the
    # standard library on their module path.
    user_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p)]
    for folder in (sys.prefix, sys.base_prefix, user_site, *user_path):
        if folder and Path(folder).is_dir():
            real = Path(folder).resolve()
            if not _inside(home, real) and real != Path("/"):
                found.append(real)
    return list(dict.fromkeys(found))


def _unique(paths: list[Path]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(str(p) for p in paths))


def _worker_scratch(cache: Path) -> list[tuple[str, Path]]:
    """(setting, folder) a worker writes to: the build cache, the system's temporary folder
    (its own temporary folder and log are made there), Triton's cache as Triton finds it, and a
    profile folder when the harness is being measured."""
    found = [(f"the cache folder (${CACHE_ENV})", cache),
             ("the temporary folder ($TMPDIR)", Path(tempfile.gettempdir()))]
    triton = os.environ.get("TRITON_CACHE_DIR", "").strip()
    if not triton:
        home = os.environ.get("TRITON_HOME", "").strip() or os.path.expanduser("~")
        triton = os.path.join(home, ".triton", "cache")
    found.append(("Triton's cache ($TRITON_CACHE_DIR)", Path(triton)))
    profile = os.environ.get(PROFILE_ENV, "").strip()
    if profile:
        found.append((f"the profile folder (${PROFILE_ENV})", Path(profile)))
    return [(what, Path(os.path.abspath(folder))) for what, folder in found]


def fork_root() -> Path | None:
    """The folder the kit runs from, protected as a whole: the fork (its root holds
    ``fib_core/``, ``scripts/``, the ledger, ``config.toml``), or None where that folder is not a
    fork of the kit alone: the home folder or anything holding it (a kit unpacked into ``~``),
    or a ``site-packages`` folder (an installed kit).

    >>> fork_root() is None or (fork_root() / "fib_core").is_dir()
    True
    """
    root = kit_root()
    home = Path(os.path.expanduser("~")).resolve()
    if _inside(home, root) or root.name in ("site-packages", "dist-packages"):
        return None
    return root


def kit_code_folders() -> list[Path]:
    """The kit's own code a run executes: the ``fib_core`` package and its ``scripts/``
    folder. Example: ``kit_code_folders()[0].name == "fib_core"``."""
    root = kit_root()
    return [f for f in (root / "fib_core", root / "scripts") if f.is_dir()]
