"""The kit's folders from the environment: the one cache folder, and the dataset a user names.

Cache: ``$FIB_CACHE_DIR`` when set, else ``~/.cache/fib_core``. Every package asks here, so one
variable moves every cached file: ``builds/`` (compiled solutions), ``reference/`` (reference
outputs and latencies), ``keys/`` (the reference cache's signing key), ``apply/`` (apply
tables), ``unsaved-traces/`` (traces a full disk kept from their file) and
``embedded-dataset-v<N>-<hash>/``.

Dataset: ``$FIB_DATASET_PATH``, read here only; each caller keeps its own default.

Example::

    from fib_core.paths import cache_dir
    cache_dir() / "reference"   # where reference outputs are kept
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "FIB_CACHE_DIR"
DEFAULT_CACHE = Path("~/.cache/fib_core")
DATASET_ENV = "FIB_DATASET_PATH"


def cache_dir() -> Path:
    """``$FIB_CACHE_DIR`` if set (and not blank), else ``~/.cache/fib_core``."""
    env = os.environ.get(CACHE_ENV, "").strip()
    return Path(env).expanduser() if env else DEFAULT_CACHE.expanduser()


def dataset_env_path() -> Path | None:
    """``$FIB_DATASET_PATH`` as a path when set (and not blank), else None."""
    env = os.environ.get(DATASET_ENV, "").strip()
    return Path(env).expanduser() if env else None
