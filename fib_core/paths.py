"""The kit's one cache folder: builds, reference outputs, the embedded dataset, apply tables.

``$FIB_CACHE_DIR`` when set, else ``~/.cache/fib_core``. Every package asks here, so one
variable moves every cached file.

Example::

    from fib_core.paths import cache_dir
    cache_dir() / "reference"   # where reference outputs are kept
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "FIB_CACHE_DIR"
DEFAULT_CACHE = Path("~/.cache/fib_core")


def cache_dir() -> Path:
    """``$FIB_CACHE_DIR`` if set (and not blank), else ``~/.cache/fib_core``."""
    env = os.environ.get(CACHE_ENV, "").strip()
    return Path(env).expanduser() if env else DEFAULT_CACHE.expanduser()
