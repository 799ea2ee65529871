"""The kit's folders from the environment: the one cache folder, and the dataset a user names.

Cache: ``$FIB_CACHE_DIR`` when set, else ``~/.cache/fib_core``. Every package asks here, so one
variable moves every cached file: ``builds/`` (compiled solutions), ``reference/`` (reference
outputs and latencies), ``keys/`` (the reference cache's signing key), ``apply/`` (apply
tables), ``unsaved-traces/`` (traces a full disk kept from their file) and
``embedded-dataset-v<N>-<hash>/``.

Dataset: ``$FIB_DATASET_PATH``, read here only; each caller keeps its own default.

Private temporary folders (worker logs, a Python solution's imported copy) come from
:func:`private_temp_dir`: whatever the process did not remove itself is removed when it exits,
so code that never calls ``close()`` (the organizers' scripts have no such call) leaves nothing
in the system's temporary folder.

Example::

    from fib_core.paths import cache_dir, private_temp_dir, remove_private_dir
    cache_dir() / "reference"   # where reference outputs are kept
    logs = private_temp_dir("fib-bench-logs-")
    remove_private_dir(logs)    # now; else at exit
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

CACHE_ENV = "FIB_CACHE_DIR"
DEFAULT_CACHE = Path("~/.cache/fib_core")
DATASET_ENV = "FIB_DATASET_PATH"
# A folder: workers and the judge run under cProfile and leave their stats there when they
# exit (benchmarks/bench_turnaround.py --profile-workers). For measuring the harness only.
PROFILE_ENV = "FIB_PROFILE_WORKERS"


def kit_root() -> Path:
    """The folder holding this ``fib_core`` package (a fork's root, or site-packages): what a
    child process puts first on its path to import the same kit, and where ``scripts/`` lies.

    >>> (kit_root() / "fib_core" / "paths.py").is_file()
    True
    """
    return Path(__file__).resolve().parents[1]


def cache_dir() -> Path:
    """``$FIB_CACHE_DIR`` if set (and not blank), else ``~/.cache/fib_core``."""
    env = os.environ.get(CACHE_ENV, "").strip()
    return Path(env).expanduser() if env else DEFAULT_CACHE.expanduser()


_OWNED: dict[str, int] = {}  # folder -> the pid that made it (a forked child removes none)
_AT_EXIT: list[bool] = []  # the exit hook is registered (once per process)


def private_temp_dir(prefix: str) -> Path:
    """A fresh folder in the system's temporary folder, removed at this process's exit unless
    :func:`remove_private_dir` removed it first."""
    path = tempfile.mkdtemp(prefix=prefix)
    if not _AT_EXIT:
        atexit.register(remove_private_dirs)
        _AT_EXIT.append(True)
    _OWNED[path] = os.getpid()
    return Path(path)


def remove_private_dir(path: str | Path) -> None:
    """Remove a folder of :func:`private_temp_dir` (or any folder) now; safe to call twice."""
    _OWNED.pop(str(path), None)
    shutil.rmtree(path, ignore_errors=True)


def remove_private_dirs() -> None:
    """Remove every folder this process made with :func:`private_temp_dir` (what its exit
    does; for a process that must leave with ``os._exit``)."""
    for path, pid in list(_OWNED.items()):
        if pid == os.getpid():
            remove_private_dir(path)


def dataset_env_path() -> Path | None:
    """``$FIB_DATASET_PATH`` as a path when set (and not blank), else None."""
    env = os.environ.get(DATASET_ENV, "").strip()
    return Path(env).expanduser() if env else None


def torch_package_dir() -> Path | None:
    """The installed torch package's folder, found without importing torch (a launcher asks
    before its own torch import); None when torch is not installed."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) if locations else None
