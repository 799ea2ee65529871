"""The key that signs cached references and latencies, kept where solutions cannot read it.

One key per cache folder, in ``<cache>/keys/``: the judge signs and verifies the reference
cache with it (:mod:`fib_core.bench.evaluation.signed_cache`), the launching process hides
its folder from every worker (:mod:`fib_core.bench.containment.mounts`), and the baselines'
cache signs its files with it too. It sits at the top of ``fib_core.bench``, beside the
settings, because all three of them read it and none of them owns it.

Example::

    key = ensure_key()  # bytes, or None where the cache folder cannot keep a file
"""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

from fib_core.atomic import atomic_write_bytes
from fib_core.paths import cache_dir

log = logging.getLogger("fib_core.bench")
KEY_BYTES = 32


def key_dir(root: Path | None = None) -> Path:
    """The folder of the signing key (hidden from workers)."""
    return (root if root is not None else cache_dir()) / "keys"


def ensure_key(root: Path | None = None) -> bytes | None:
    """The cache signing key, created (mode 0600) on first use; None if it cannot be kept."""
    path = key_dir(root) / "reference.key"
    try:
        data = path.read_bytes()
        if len(data) == KEY_BYTES:
            return data
    except OSError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write_bytes(path, secrets.token_bytes(KEY_BYTES), mode=0o600)
        return path.read_bytes()
    except OSError as err:
        log.warning(
            "cannot keep a signing key for the reference cache (%s); cached "
            "references will be recomputed each run",
            err,
        )
        return None

