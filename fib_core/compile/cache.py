"""The on-disk build cache: one folder per (solution hash, build-options key).

Layout: ``<cache>/builds/<solution hash>/<options key>/`` holds a finished build and its
``build.json``. Two processes (e.g. isolated benchmark workers) often build the same solution at
the same moment, so a build runs under an exclusive file lock beside its folder, in a private
temporary folder that is renamed into place only when complete: a crash mid-build never leaves
a half-built folder that looks finished. ``flock`` locks die with their process, so a killed
build cannot leave a stale lock behind.

An unwritable cache (read-only disk, a file where a folder should be) fails at once with the
folder's name and the variable that moves it; a lock held too long fails after a timeout.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fib_core.errors import BuildError

from .options import CACHE_ENV

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: builds still work, without the lock
    fcntl = None  # type: ignore[assignment]

MANIFEST = "build.json"
_POLL_S = 0.1


def builds_root(cache_dir: Path) -> Path:
    return cache_dir / "builds"


def build_slot(cache_dir: Path, solution_hash: str, options_key: str) -> Path:
    """Where the finished build of this solution with these options lives."""
    return builds_root(cache_dir) / solution_hash / options_key


def ensure_writable(folder: Path) -> None:
    """Create ``folder`` or raise a BuildError naming it and ``$FIB_CACHE_DIR``."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-", delete=True)
        probe.close()
    except OSError as exc:
        raise BuildError(
            f"build cache folder {folder} is not writable ({exc.__class__.__name__}: "
            f"{exc.strerror or exc}); set {CACHE_ENV} to a writable folder"
        ) from None


@contextmanager
def file_lock(path: Path, timeout_s: float) -> Iterator[None]:
    """Exclusive lock on ``path`` (created if needed), waiting at most ``timeout_s`` seconds."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise BuildError(
            f"cannot create lock file {path} ({exc.strerror or exc}); set {CACHE_ENV} to a "
            "writable folder"
        ) from None
    try:
        if fcntl is not None:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise BuildError(
                            f"waited {timeout_s:g} s for another process building into "
                            f"{path.with_suffix('')} (lock {path}); stop that process or raise "
                            "BuildOptions.lock_timeout_s"
                        ) from None
                    time.sleep(_POLL_S)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def read_manifest(slot: Path) -> dict[str, Any] | None:
    """The finished build's manifest, or None when the slot holds no complete build."""
    try:
        return json.loads((slot / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def cached_build(
    slot: Path,
    produce: Callable[[Path], dict[str, Any]],
    timeout_s: float,
) -> tuple[dict[str, Any], bool]:
    """Return ``(manifest, was_cached)`` for ``slot``, running ``produce`` once if needed.

    ``produce(tmp_dir)`` builds into an empty private folder and returns the manifest (JSON-able)
    to store; the folder then becomes ``slot`` by one atomic rename. If ``produce`` raises, the
    private folder is removed and the exception propagates.
    """
    ensure_writable(slot.parent)
    manifest = read_manifest(slot)
    if manifest is not None:
        return manifest, True
    with file_lock(slot.parent / f"{slot.name}.lock", timeout_s):
        manifest = read_manifest(slot)  # another process may have finished while we waited
        if manifest is not None:
            return manifest, True
        if slot.exists():  # left by an older, interrupted layout: not a finished build
            shutil.rmtree(slot, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{slot.name}-", dir=slot.parent))
        try:
            manifest = produce(tmp)
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
            os.replace(tmp, slot)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return manifest, False
