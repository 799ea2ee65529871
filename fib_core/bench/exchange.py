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

import fcntl
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
        self._pinned: Any = None  # a tensor over the whole mapping while it is registered

    def pin(self) -> bool:
        """Page-lock the mapping for CUDA (``cudaHostRegister``), so copies between it and a
        GPU go by DMA instead of through the driver's staging buffer: 33.5 MB took 0.66 ms
        instead of 3.1 ms each way on an H100. (The parent allocated the pages, see
        :meth:`ArenaHandle.create`.) Only arenas up to :data:`PIN_MAX_BYTES`; False (copies stay pageable, as before) when
        the arena is larger or CUDA refuses."""
        size = self.slots * self.slot_bytes
        if self._pinned is not None or size > PIN_MAX_BYTES:
            return self._pinned is not None
        import torch

        whole = torch.frombuffer(self._map, dtype=torch.uint8)
        try:
            status = torch.cuda.cudart().cudaHostRegister(whole.data_ptr(), size, 0)
        except Exception:
            return False
        if int(status) != 0:
            return False
        self._pinned = whole
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
            import torch

            try:
                torch.cuda.cudart().cudaHostUnregister(self._pinned.data_ptr())
            except Exception:
                pass
            self._pinned = None
        try:
            self._map.close()
        except BufferError:  # a tensor still views it: the mapping goes with the last one
            pass


def receive_arena(
    message: tuple, fds: list[int], current: Arena | None, pin: bool = False
) -> Arena | None:
    """Worker and judge: map the arena an ``("arena", id, slots, slot_bytes)`` message brought
    (its descriptor in ``fds``), replacing ``current``, and with ``pin`` (a process using a
    GPU) page-lock it; None when it came without one or cannot be mapped (outputs then go as
    bytes; the judge reports checks naming it)."""
    if current is not None:
        current.close()
    for extra in fds[1:]:
        os.close(extra)
    if not fds:
        return None
    _, arena_id, slots, slot_bytes = message
    try:
        arena = Arena(fds[0], arena_id, slots, slot_bytes)
    except (OSError, ValueError):
        return None
    if pin:
        arena.pin()
    return arena
