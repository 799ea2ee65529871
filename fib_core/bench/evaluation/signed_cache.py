"""Cached references and latencies signed with a key solutions cannot read (the key:
:mod:`fib_core.bench.integrity`).

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
inputs, and queues the next workload's files while the current one runs
(:meth:`SignedReferenceCache.prefetch_upcoming`); a check waits for its own file only, so a
warm run's first check of a workload rarely waits for the disk or the hash.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import os
import struct
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fib_core.bench.evaluation.reference import ReferenceCache, write_cache_file

log = logging.getLogger("fib_core.bench")


# Threads that read and verify cached files. Two keep ahead of a warm GDN decode run (about
# 10 GB of references) and leave the CPUs to the worker, which may be timing a launch-bound
# kernel meanwhile: on a 16-CPU H100 machine, three warm runs each took 13.2-13.3 s with two
# threads against 13.4-13.9 s with eight, and the judge's reference pass 0.6-0.8 s against
# 0.9-1.2 s.
READ_THREADS = 2
PREFETCH_BYTES = 2 << 30  # host memory prefetched files may take at once (this and the next)


def _digest(key: bytes, data: Any) -> str:
    return hmac.new(key, data, hashlib.sha256).hexdigest()


PINNED_BYTES = 2 << 30  # page-locked host memory a judge's reads may hold (whole blocks)
_MIN_BLOCK = 1 << 20


class PinnedPool:
    """Page-locked host blocks for the judge's reads of reference files, kept and reused.

    Why: the judge copies every reference it loads to its GPU, about 10 GB in a warm GDN
    decode run. From pageable memory that copy runs at about 4 GB/s on an H100 host; from
    page-locked memory it is a DMA at PCIe speed. Page-locking is slow (about 0.4 ms per MB),
    so blocks are allocated once and reused: sizes are rounded up to a power of two (from
    1 MiB), and a block goes back to its class when the last view of the buffer made from it
    dies (a read served, or dropped unserved). At most ``limit`` bytes of blocks are ever
    allocated (counted whole); past that a read gets ordinary memory, as on a machine without
    a GPU. Allocations set the reading thread's device first, so no context is made on
    another GPU. Thread-safe: reads run in a small pool of threads.

    Example: ``PinnedPool("cuda:0").take(1 << 20)`` is a 1 MiB NumPy buffer in page-locked
    memory on a GPU machine, None elsewhere.
    """

    def __init__(self, device: str, limit: int = PINNED_BYTES) -> None:
        self.device, self.limit = device, limit
        self._free: dict[int, list] = {}
        self._owned = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> Any:
        """A writable NumPy buffer of ``size`` bytes in page-locked memory, or None."""
        if size <= 0:
            return None
        block = max(_MIN_BLOCK, 1 << (size - 1).bit_length())
        with self._lock:
            free = self._free.get(block)
            tensor = free.pop() if free else None
            if tensor is None:
                if self._owned + block > self.limit:
                    return None
                self._owned += block  # reserved before allocating, outside the lock
        if tensor is None:
            try:
                tensor = self._allocate(block)
            except (RuntimeError, AssertionError, ValueError):  # no GPU, or none to be had
                with self._lock:
                    self._owned -= block
                return None
        view = tensor[:size].numpy()
        weakref.finalize(view, self._give, block, tensor)
        return view

    def _allocate(self, block: int) -> Any:
        # Imported here: torch takes ~3 s to load, and importing this module does not need it.
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device: no page-locked memory")
        torch.cuda.set_device(self.device)
        return torch.empty(block, dtype=torch.uint8, pin_memory=True)

    def _give(self, block: int, tensor: Any) -> None:
        with self._lock:
            self._free.setdefault(block, []).append(tensor)


def host_buffer(size: int, pool: PinnedPool | None = None) -> Any:
    """A writable buffer of ``size`` bytes: from ``pool`` (page-locked) when it has one to
    give, else a bytearray.

    Example: ``host_buffer(16)`` is a 16-byte bytearray on any machine."""
    buf = pool.take(size) if pool is not None else None
    return buf if buf is not None else bytearray(size)


def _read(path: Path, pool: PinnedPool | None = None) -> Any:
    """The whole file in one writable buffer (tensors can be views of it), page-locked when
    ``pool`` has a block for it (see :class:`PinnedPool`)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size  # the file opened, even if replaced since
        buf = host_buffer(size, pool)
        if fh.readinto(buf) != size:
            raise OSError(f"{path} changed while being read")
    return buf


# A file being read ahead: (its read, its size when asked for).
_Entry = tuple[Future, int]


class SignedReferenceCache(ReferenceCache):
    """A :class:`ReferenceCache` whose every file must carry a valid signature to be used.

    Reads ahead file by file: each file a workload may check is read and verified by a small
    thread pool, in the order asked for, and a load waits for its own file only (a workload's
    first check needs one file, not all sixteen). The next workload's files are queued behind
    the current one's. Only the judge's main thread changes the bookkeeping; the pool's
    threads only read and verify.
    """

    def __init__(self, key: bytes | None, root: Path | None = None,
                 pin_device: str | None = None) -> None:
        super().__init__(root)
        self.key = key
        # A judge on a GPU reads output files into page-locked memory (PinnedPool).
        self._pinned_pool = PinnedPool(pin_device) if pin_device else None
        self._pool: ThreadPoolExecutor | None = None
        self._current: dict[Path, _Entry] = {}  # this workload's files
        self._upcoming: dict[Path, _Entry] = {}  # the next workload's (prefetch_upcoming)
        self._running: dict[Path, list[Future]] = {}  # dropped while being read: not served

    def prefetch_outputs(self, definition: Any, keys: Sequence[str]) -> None:
        """Start reading and verifying these output files side by side; :meth:`load_outputs`
        then uses the verified bytes (each at most once), waiting for that file only. Files
        already read ahead are taken over; the next workload's stay queued."""
        wanted = [self._path(definition, key, ".safetensors") for key in keys]
        for path in wanted:
            if path in self._upcoming and path not in self._current:
                self._current[path] = self._upcoming.pop(path)
        self._submit(wanted, self._current)

    def prefetch_in_background(self, definition: Any, keys: Sequence[str]) -> None:
        """Start reading this workload's files (the judge does it when a task starts, while
        the worker builds and makes its inputs). Files :meth:`prefetch_upcoming` read ahead
        for it are taken over, not read again; the rest of what was read ahead is dropped."""
        wanted = {self._path(definition, key, ".safetensors") for key in keys}
        self._drop({p: self._upcoming.pop(p) for p in list(self._upcoming) if p not in wanted})
        self.prefetch_outputs(definition, keys)  # (dropped first: out of the budget)

    def prefetch_upcoming(self, definition: Any, keys: Sequence[str]) -> None:
        """Queue the next workload's files behind the current one's; the next
        :meth:`prefetch_in_background` takes them over. Whatever it does not take is dropped
        then (a workload skipped, an order changed): nothing read ahead is served to another
        workload."""
        self._drop(self._upcoming)
        self._submit([self._path(definition, key, ".safetensors") for key in keys],
                     self._upcoming)

    def forget_prefetched(self) -> None:
        """Drop this workload's files read ahead and not loaded (the workload is over); the
        next workload's stay."""
        self._drop(self._current)

    def close(self) -> None:
        """Stop reading ahead: queued reads are cancelled and the pool's threads are not
        waited for (a process exit would otherwise wait for every queued read and hash)."""
        self._drop(self._current)
        self._drop(self._upcoming)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _submit(self, paths: list[Path], into: dict[Path, _Entry]) -> None:
        if self.key is None:
            return
        total = sum(size for entries in (self._current, self._upcoming)
                    for _, size in entries.values())
        for path in paths:
            if path in into:
                continue
            try:
                size = path.stat().st_size
            except OSError:
                continue
            if total + size > PREFETCH_BYTES:
                continue  # loaded when asked for, as without a read-ahead
            if self._pool is None:
                self._pool = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="verify")
            into[path] = (self._pool.submit(self._read_verified, path, self._pinned_pool),
                          size)
            total += size

    def _drop(self, entries: dict[Path, _Entry]) -> None:
        for path, (future, _) in entries.items():
            if not future.cancel():  # already running: it finishes, its bytes are not served
                self._running.setdefault(path, []).append(future)
        entries.clear()
        running = {p: [f for f in fs if not f.done()] for p, fs in self._running.items()}
        self._running = {p: fs for p, fs in running.items() if fs}

    def _forget_path(self, path: Path) -> None:
        """Before ``path`` is rewritten: no read of the old file may be served, nor still be
        running while the new one is written (it would fail its signature, with a warning),
        including a read dropped while it ran."""
        futures = self._running.pop(path, [])
        for entries in (self._current, self._upcoming):
            entry = entries.pop(path, None)
            if entry is not None:
                futures.append(entry[0])
        for future in futures:
            if not future.cancel():
                try:
                    future.result()
                except Exception:
                    pass

    def _verified(self, path: Path) -> Any:
        entry = self._current.pop(path, None)
        if entry is not None:
            try:
                return entry[0].result()
            except Exception as err:  # only a head start: read it here instead
                log.warning("reading ahead %s failed (%s)", path, err)
        pinned = self._pinned_pool if path.suffix == ".safetensors" else None
        return self._read_verified(path, pinned)

    def _read_verified(self, path: Path, pinned: PinnedPool | None = None) -> Any:
        """The file's bytes if its signature verifies, else None (thread-safe: no state)."""
        if self.key is None:
            return None
        try:
            data = _read(path, pinned)
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
        self._forget_path(self._path(definition, key, ".safetensors"))
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


def _header(data: Any) -> tuple[dict, int]:
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


def _view(data: Any, header: tuple[dict, int], name: str) -> Any:
    """Tensor ``name`` as a view of ``data`` (no copy), from its header entry; ValueError when
    the entry does not describe a whole, in-range tensor."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    # Imported here: fib_core.data.dtypes loads pydantic (~50 ms); this module's import does not.
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
