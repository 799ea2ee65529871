"""Shared memory through which a worker hands its outputs to the judge.

A check's outputs are tens of megabytes (a GDN decode state at batch 64 is 33.5 MB, ten
checks per workload). Sent as bytes they were copied five times: device to host, into the
parent's socket, out of it, into the judge's socket, out of it. With an arena the worker
copies them from its device straight into shared memory and the judge copies them from there
to its device; only a small header goes through the parent, which still validates it and
keeps the ledger.

The parent creates the arena (a sealed ``memfd``: its size can never change, so a mapping of
it can never fault) and passes the same descriptor to the worker and to the judge. The arena
is ``slots`` regions of ``slot_bytes``; the worker's checks take the slots in turn, at most
``slots`` in flight (verdicts come back in order, so the oldest slot is free again once its
verdict arrives).

What the worker can do with it: write any bytes into any slot at any time, which is no more
than it can do by sending bytes (its outputs are its own to choose). The judge reads a slot
only where the validated header says, copies it to its own memory before comparing, and never
reads anything else of the worker's; the worker never sees the judge's memory.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import itertools
import mmap
import os
from dataclasses import dataclass
from typing import Any

SLOTS = 8  # checks in flight at most (the worker's RemoteChecker.MAX_IN_FLIGHT)
# Arenas up to this size are page-locked for the GPU on both sides (see Arena.pin).
PIN_MAX_BYTES = 1 << 30
MIN_SLOT_BYTES = 1 << 20
# Larger outputs go as bytes (up to the wire's own cap): eight slots of them would be more
# shared memory than a run should ask for, and a workload that large fails its memory check.
MAX_SLOT_BYTES = 1 << 30
NO_ARENA = ("arena", 0, 0, 0)  # sent without a descriptor: outputs go as bytes from now on
_REGISTER_PORTABLE = 0x01  # CU_MEMHOSTREGISTER_PORTABLE: pinned for every context


@functools.lru_cache(maxsize=1)
def cuda_driver() -> Any:
    """The CUDA driver library (ctypes), or None where there is none (a machine without a GPU).

    The driver API is used where the runtime would leave a sticky error behind or where the
    call must not import anything (see ``fib_core.bench.evaluation.worker``'s early context).

    Example: ``cuda_driver() is None`` on a machine without a GPU."""
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def supported() -> bool:
    """Whether this system has sealed memfds (Linux); elsewhere outputs go over the socket."""
    return hasattr(os, "memfd_create") and hasattr(fcntl, "F_ADD_SEALS")


def slot_size(needed: int) -> int:
    """A slot of at least ``needed`` bytes, rounded up to a power of two so that a run whose
    workloads grow (batch 1, 4, 8 ... 64) replaces its arena a few times, not every time."""
    size = MIN_SLOT_BYTES
    while size < needed:
        size *= 2
    return size


_IDS = itertools.count(1)


@dataclass
class ArenaHandle:
    """Parent side: one arena's descriptor, and the shape the children are told."""

    fd: int
    arena_id: int
    slots: int
    slot_bytes: int

    @classmethod
    def create(cls, needed: int, slots: int = SLOTS) -> ArenaHandle:
        """A sealed memfd with ``slots`` slots of at least ``needed`` bytes (close-on-exec:
        it reaches a child only through :meth:`message`'s descriptor passing)."""
        slot_bytes = slot_size(needed)
        fd = os.memfd_create("fib-outputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, slots * slot_bytes)
            if slots * slot_bytes <= PIN_MAX_BYTES and hasattr(os, "posix_fallocate"):
                # Its pages exist before the children page-lock it (registering then only
                # pins them: 24 ms for 512 MiB on an H100, against 202 ms while faulting them
                # in), and memory that is not there fails here, not as a fault in a child.
                os.posix_fallocate(fd, 0, slots * slot_bytes)
            seals = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        except OSError:
            os.close(fd)
            raise
        return cls(fd, next(_IDS), slots, slot_bytes)

    def message(self) -> tuple[Any, ...]:
        """What the parent sends, with :attr:`fd` passed alongside."""
        return ("arena", self.arena_id, self.slots, self.slot_bytes)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Arena:
    """A mapping of the parent's arena, in the worker (which writes) or the judge (which
    reads). Takes ownership of ``fd``."""

    def __init__(self, fd: int, arena_id: int, slots: int, slot_bytes: int) -> None:
        size = slots * slot_bytes
        try:
            if os.fstat(fd).st_size != size:
                raise ValueError("the shared output buffer has another size than announced")
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.arena_id, self.slots, self.slot_bytes = arena_id, slots, slot_bytes
        self._next = 0
        self._pinned: tuple[Any, Any] | None = None  # (driver, view) while registered
        self._pin_tried = False

    def pin(self) -> bool:
        """Page-lock the mapping for the GPU, so copies between it and a GPU go by DMA instead
        of through the driver's staging buffer: 33.5 MB took 0.66 ms instead of 3.1 ms each
        way on an H100. (The parent allocated the pages, see :meth:`ArenaHandle.create`.)

        Through the driver API (``cuMemHostRegister``), whose failures leave no error behind:
        a refused ``cudaHostRegister`` would stay as the runtime's last error and fail the next
        kernel launch. Needs this thread's CUDA context, so it is asked at each use until the
        context exists, then once. Only arenas up to :data:`PIN_MAX_BYTES`; False (copies stay
        pageable, as before) on a machine without CUDA, for a larger arena, or when refused.
        """
        if self._pin_tried:
            return self._pinned is not None
        size = self.slots * self.slot_bytes
        driver = cuda_driver()
        if size > PIN_MAX_BYTES or driver is None:
            self._pin_tried = True
            return False
        context = ctypes.c_void_p()
        if driver.cuCtxGetCurrent(ctypes.byref(context)) != 0 or not context.value:
            return False  # no context yet: asked again at the next use
        self._pin_tried = True
        view = (ctypes.c_char * size).from_buffer(self._map)
        register = getattr(driver, "cuMemHostRegister_v2", None) or driver.cuMemHostRegister
        status = register(ctypes.c_void_p(ctypes.addressof(view)), ctypes.c_size_t(size),
                          ctypes.c_uint(_REGISTER_PORTABLE))
        if status != 0:
            del view
            return False
        self._pinned = (driver, view)
        return True

    def take(self) -> int:
        """The next slot, in turn (the caller keeps at most ``slots`` checks in flight)."""
        slot, self._next = self._next, (self._next + 1) % self.slots
        return slot

    def region(self, slot: int, nbytes: int) -> memoryview:
        """Bytes ``0 .. nbytes`` of ``slot`` (bounds checked here as well as by the parent)."""
        if not 0 <= slot < self.slots or not 0 <= nbytes <= self.slot_bytes:
            raise ValueError(f"slot {slot} / {nbytes} bytes is outside the shared buffer")
        start = slot * self.slot_bytes
        return memoryview(self._map)[start : start + nbytes]

    def close(self) -> None:
        if self._pinned is not None:
            driver, view = self._pinned
            driver.cuMemHostUnregister(ctypes.c_void_p(ctypes.addressof(view)))
            self._pinned = None
            del view
        try:
            self._map.close()
        except BufferError:  # a tensor still views it: the mapping goes with the last one
            pass


def receive_arena(message: tuple, fds: list[int], current: Arena | None) -> Arena | None:
    """Worker and judge: map the arena an ``("arena", id, slots, slot_bytes)`` message brought
    (its descriptor in ``fds``), replacing ``current``; None when it came without one or
    cannot be mapped (outputs then go as bytes; the judge reports checks naming it)."""
    if current is not None:
        current.close()
    for extra in fds[1:]:
        os.close(extra)
    if not fds:
        return None
    _, arena_id, slots, slot_bytes = message
    try:
        return Arena(fds[0], arena_id, slots, slot_bytes)
    except (OSError, ValueError):
        return None
