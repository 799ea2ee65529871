"""Cached references and latencies signed with a key solutions cannot read.

The reference cache lives under the user's cache folder, which a solution running as the same
user could rewrite (a cached reference latency of 1000 ms makes every later honest run report a
huge speedup). Each cached file gets an HMAC-SHA256 sidecar computed with a key kept in
``<cache>/keys/``: the judge process (kit code only) signs what it writes and loads only what
verifies, from the very bytes it verified. Workers never get the key: the engine hides the
``keys`` folder from them (an empty tmpfs over it) where the OS allows namespaces.

A warm run loads every checked set's outputs (330 MB for a batch-64 GDN decode workload), so
loading is lean: each file is read once into one buffer, the files of a workload are verified
side by side in threads (hashing releases the GIL), and tensors are views of the verified
buffer until they move to the device. The judge starts that read when a task starts
(:meth:`SignedReferenceCache.prefetch_in_background`), while the worker builds and makes
inputs, and reads the next workload's files while the current one runs
(:meth:`SignedReferenceCache.prefetch_upcoming`), so a warm run's first check of a workload
rarely waits for the disk or the hash.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import struct
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fib_core.atomic import atomic_write_bytes
from fib_core.bench.reference import ReferenceCache, write_cache_file
from fib_core.paths import cache_dir

log = logging.getLogger("fib_core.bench")
KEY_BYTES = 32


def key_dir(root: Path | None = None) -> Path:
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


VERIFY_THREADS = 8
# The next workload's files are read by fewer threads: it has a whole workload's time, during
# which the worker may be timing (launch-bound kernels should not fight the judge for CPUs).
UPCOMING_THREADS = 2
PREFETCH_BYTES = 2 << 30  # host memory prefetched files may take at once (this and the next)


def _digest(key: bytes, data: bytes | bytearray) -> str:
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def _read(path: Path) -> bytearray:
    """The whole file in one writable buffer (tensors can be views of it)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size  # the file opened, even if replaced since
        buf = bytearray(size)
        if fh.readinto(buf) != size:
            raise OSError(f"{path} changed while being read")
    return buf


class SignedReferenceCache(ReferenceCache):
    """A :class:`ReferenceCache` whose every file must carry a valid signature to be used."""

    def __init__(self, key: bytes | None, root: Path | None = None) -> None:
        super().__init__(root)
        self.key = key
        self._prefetched: dict[Path, bytearray | None] = {}
        self._pending: threading.Thread | None = None
        self._cancel = threading.Event()
        # The next workload's files, read while the current one runs (prefetch_upcoming).
        self._upcoming: dict[Path, bytearray | None] = {}
        self._upcoming_paths: set[Path] = set()
        self._upcoming_thread: threading.Thread | None = None
        self._upcoming_cancel = threading.Event()

    def prefetch_outputs(self, definition: Any, keys: Sequence[str]) -> None:
        """Read and verify these output files side by side; :meth:`load_outputs` then uses
        the verified bytes (each at most once)."""
        self._settle()
        self._prefetch(definition, list(keys))

    def prefetch_in_background(self, definition: Any, keys: Sequence[str]) -> None:
        """:meth:`prefetch_outputs` in a thread, so the judge reads and verifies a workload's
        files while the worker builds and makes its inputs. Any later use of the cache waits
        for it first, so nothing is read half-done. Files :meth:`prefetch_upcoming` already
        read for this workload are taken over, not read again."""
        self._settle()
        self._take_upcoming({self._path(definition, key, ".safetensors") for key in keys})
        thread = threading.Thread(
            target=self._prefetch, args=(definition, list(keys)), name="prefetch", daemon=True
        )
        self._pending = thread
        thread.start()

    def prefetch_upcoming(self, definition: Any, keys: Sequence[str]) -> None:
        """Read and verify the next workload's files in a thread that first lets the current
        workload's prefetch finish (the current first check waits for that one); the next
        :meth:`prefetch_in_background` takes them over. Whatever it does not take is dropped
        then (a workload skipped, an order changed): nothing read ahead is served to another
        workload."""
        self._drop_upcoming()
        current = self._pending
        self._upcoming_paths = {self._path(definition, key, ".safetensors") for key in keys}

        def run() -> None:
            if current is not None:
                current.join()
            self._prefetch(
                definition, list(keys), self._upcoming, self._upcoming_cancel, UPCOMING_THREADS
            )

        thread = threading.Thread(target=run, name="prefetch-next", daemon=True)
        self._upcoming_thread = thread
        thread.start()

    def _take_upcoming(self, wanted: set[Path]) -> None:
        thread, self._upcoming_thread = self._upcoming_thread, None
        if thread is not None:
            thread.join()
        for path, data in self._upcoming.items():
            if path in wanted and data is not None:
                self._prefetched[path] = data
        self._upcoming.clear()
        self._upcoming_paths = set()

    def _drop_upcoming(self) -> None:
        self._upcoming_cancel.set()
        thread, self._upcoming_thread = self._upcoming_thread, None
        if thread is not None:
            thread.join()
        self._upcoming_cancel.clear()
        self._upcoming.clear()
        self._upcoming_paths = set()

    def forget_prefetched(self) -> None:
        """Drop whatever was prefetched and not loaded (the workload is over); a background
        prefetch still reading stops at its next file."""
        self._cancel.set()
        self._settle()
        self._cancel.clear()
        self._prefetched.clear()

    def _settle(self) -> None:
        """Wait for a background prefetch (its files are then in ``_prefetched``)."""
        thread, self._pending = self._pending, None
        if thread is not None:
            thread.join()

    def _prefetch(
        self,
        definition: Any,
        keys: list[str],
        into: dict[Path, bytearray | None] | None = None,
        cancel: threading.Event | None = None,
        threads: int = VERIFY_THREADS,
    ) -> None:
        into = self._prefetched if into is None else into
        cancel = self._cancel if cancel is None else cancel
        held = list(self._prefetched.values()) + list(self._upcoming.values())
        paths, total = [], sum(len(d) for d in held if d is not None)
        try:
            for key in keys:
                path = self._path(definition, key, ".safetensors")
                try:
                    size = path.stat().st_size
                except OSError:
                    continue
                if path in into or total + size > PREFETCH_BYTES:
                    continue  # the rest load one by one, as without a prefetch
                paths.append(path)
                total += size
            if self.key is None or not paths:
                return

            def read(path: Path) -> bytearray | None:
                return None if cancel.is_set() else self._read_verified(path)

            with ThreadPoolExecutor(max_workers=min(threads, len(paths))) as pool:
                for path, data in zip(paths, pool.map(read, paths), strict=True):
                    into[path] = data
        except Exception as err:  # only a head start: the loads read the files themselves
            log.warning("prefetching cached references failed (%s)", err)

    def _verified(self, path: Path) -> bytearray | None:
        self._settle()
        if path in self._prefetched:
            return self._prefetched.pop(path)
        return self._read_verified(path)

    def _read_verified(self, path: Path) -> bytearray | None:
        """The file's bytes if its signature verifies, else None (thread-safe: no state)."""
        if self.key is None:
            return None
        try:
            data = _read(path)
            sig = path.with_name(path.name + ".sig").read_text().strip()
        except OSError:
            return None
        if not hmac.compare_digest(sig, _digest(self.key, data)):
            log.warning(
                "reference cache %s fails its signature (changed outside the judge); recomputing",
                path,
            )
            return None
        return data

    def _sign(self, path: Path) -> None:
        if self.key is None:
            return
        try:
            data = path.read_bytes()
        except OSError:
            return
        sig = _digest(self.key, data)
        write_cache_file(path.with_name(path.name + ".sig"), lambda tmp: tmp.write_text(sig))

    def load_outputs(self, definition: Any, key: str, device: str) -> list | None:
        data = self._verified(self._path(definition, key, ".safetensors"))
        if data is None:
            return None
        try:
            header = _header(data)
            scalars = set(json.loads(header[0]["__metadata__"].get("scalars", "[]")))
            outputs = []
            for name in definition.output_names:
                tensor = _view(data, header, name)
                outputs.append(tensor.item() if name in scalars else tensor.to(device))
            return outputs
        except Exception as err:
            log.warning("signed reference cache entry unreadable (%s); recomputing", err)
            return None

    def store_outputs(self, definition: Any, key: str, outputs: Sequence) -> None:
        self._settle()
        path = self._path(definition, key, ".safetensors")
        self._prefetched.pop(path, None)
        if path in self._upcoming_paths:
            self._drop_upcoming()  # never read ahead what is being rewritten
        super().store_outputs(definition, key, outputs)
        self._sign(self._path(definition, key, ".safetensors"))

    def load_latency(self, definition: Any, key: str) -> dict | None:
        data = self._verified(self._path(definition, key, ".latency.json"))
        if data is None:
            return None
        try:
            record = json.loads(data)
            float(record["latency_ms"])
            return record if isinstance(record.get("extra"), dict) else None
        except (ValueError, KeyError, TypeError):
            return None

    def store_latency(self, definition: Any, key: str, record: dict) -> None:
        super().store_latency(definition, key, record)
        self._sign(self._path(definition, key, ".latency.json"))


# safetensors dtype names -> torch dtype names (the ones reference outputs use).
_SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
    "BOOL": "bool", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
}


def _header(data: bytearray) -> tuple[dict, int]:
    """(JSON header, where the data starts) of a safetensors file held in memory."""
    (n,) = struct.unpack("<Q", bytes(data[:8]))
    if n > len(data) - 8:
        raise ValueError("safetensors header runs past the end of the file")
    header = json.loads(bytes(data[8 : 8 + n]))
    if not isinstance(header, dict):
        raise ValueError("safetensors header is not an object")
    meta = header.get("__metadata__")
    header["__metadata__"] = meta if isinstance(meta, dict) else {}
    return header, 8 + n


def _view(data: bytearray, header: tuple[dict, int], name: str) -> Any:
    """Tensor ``name`` as a view of ``data`` (no copy), from its header entry; ValueError when
    the entry does not describe a whole, in-range tensor."""
    import math

    import torch

    from fib_core.data.dtypes import TORCH_ELEMENT_BYTES

    entries, base = header
    entry = entries[name]
    dtype_name = _SAFETENSORS_DTYPES[entry["dtype"]]
    dtype = getattr(torch, dtype_name)
    offsets, shape = entry["data_offsets"], entry["shape"]
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
               for x in (*offsets, *shape)) or len(offsets) != 2:
        raise ValueError(f"safetensors entry {name!r} has malformed offsets or shape")
    begin, end = base + offsets[0], base + offsets[1]
    itemsize = TORCH_ELEMENT_BYTES[dtype_name]
    if not base <= begin <= end <= len(data) or end - begin != math.prod(shape) * itemsize:
        raise ValueError(f"safetensors entry {name!r} does not fit the file")
    if end == begin:
        return torch.empty(shape, dtype=dtype)
    raw = torch.frombuffer(data, dtype=torch.uint8, count=end - begin, offset=begin)
    return raw.view(dtype).reshape(shape)
