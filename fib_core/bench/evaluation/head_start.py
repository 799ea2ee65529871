"""What a worker or judge process starts before it imports torch, and its device settled.

Importing torch takes about 1.5 s; the CUDA context (0.5 to 0.7 s) and ``nvidia-smi`` can start
before it and run beside it (:class:`HeadStart`). The environment the driver reads is settled
first (:func:`settle_environment`), and the context is finished when the first task arrives
(:func:`settle_context`), so a spare booting beside a timed worker never touches the GPU.
"""

from __future__ import annotations

import ctypes
import getpass
import os
import re
import select
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

from fib_core.bench.evaluation import exchange
from fib_core.bench.evaluation.environment import start_smi
from fib_core.bench.evaluation.timeline import mark


def settle_environment() -> None:
    """Set ``CUDA_MODULE_LOADING`` to lazy (unless set), and ``TORCHINDUCTOR_CACHE_DIR``
    to the folder torch would choose (in this worker's
    private temporary folder), unless it is set: torch sets it the first time its compiler's
    cache folder is asked for, which importing ``torch._dynamo`` does, and the worker no longer
    does that before its baseline. A solution importing it would otherwise read as changing the
    worker's environment (what ``torch.compile`` sets when it compiles still does). The folder
    is torch's rule, not asked of torch: asking imports the compiler (about 1 s)."""
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}"
    name = "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(), name))
    # Lazy module loading: the driver's default since CUDA 12.2, and what torch versions that
    # set anything set before they start the driver. Set here because the driver may now start
    # before torch is imported (:func:`open_context_early`), and reads it once, at its start.
    os.environ.setdefault("CUDA_MODULE_LOADING", "LAZY")


def open_context_early(requested: str) -> threading.Thread | None:
    """Start creating this process's CUDA context in a thread, from the process's first
    moments: the driver's start and the context (0.5 to 0.7 s alone on an H200 machine) then
    happen while the main thread imports torch, which they slow (both map memory): about 0.1 s
    is gained net, against making the context after the import.

    For a judge, and for a worker started with ``--context-at-start``: one nothing else is
    timing beside (a run's first worker, a replacement), never a spare. The thread makes the
    driver's primary context of the requested device (``auto`` and ``cuda`` mean device 0, as
    in :func:`.environment.resolve_device`) through the driver API, which torch then uses as
    its own. It runs no Python import, so it cannot meet an import of the main thread halfway;
    the environment the driver reads is settled before it starts (:func:`settle_environment`).
    A failure here (no GPU, no driver) is only a lost head start: :func:`settle_context`
    makes the context as before, or the device resolves to the CPU.
    """
    index = device_index(requested)
    if index is None:
        return None
    driver = exchange.cuda_driver()  # looked up per call: tests stand in a driver
    if driver is None:
        return None

    def create() -> None:
        handle, context = ctypes.c_int(), ctypes.c_void_p()
        if driver.cuInit(0) == 0 and driver.cuDeviceGet(ctypes.byref(handle), index) == 0:
            driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle)

    thread = threading.Thread(target=create, name="cuda-context", daemon=True)
    thread.start()
    return thread


def device_index(requested: str) -> int | None:
    """The CUDA device a ``--device`` value will resolve to, if it is a GPU: ``auto`` and
    ``cuda`` are device 0 (:func:`.environment.resolve_device`), ``cuda:N`` is N, anything
    else None."""
    if requested in ("auto", "cuda"):
        return 0
    kind, _, number = requested.partition(":")
    if kind != "cuda":
        return None
    try:
        return int(number)
    except ValueError:
        return None


def warm_triton(sock: Any, grace: float = 0.25) -> None:
    """A GPU worker's Triton, before its first task: imported always (about 0.06 s after torch
    on an H200 machine), so that Triton's module is watched by the tamper check in every GPU
    worker alike (:func:`_fingerprint` watches what is imported when it is taken); then,
    unless a task comes within ``grace`` seconds, Triton's ``triton_key`` computed: the hash of
    its own files (its compiler library included) that a process pays once, at its first
    kernel launch (0.35 s of a 0.42 s first GDN decode call on an H200). A worker that waits
    (``run_local.py --watch`` between edits, a spare, a first worker whose launcher is still
    loading) pays it there instead of in its first task; one whose task comes at once
    leaves it to the solution's first launch, or to nobody when the solution launches no
    Triton kernel. The hash cannot be stopped halfway: a task arriving during it waits for
    the rest. CPU work only. A Triton without that function, or one that fails here, is
    left to fail, if at all, in the solution's own call."""
    try:
        # Imported here: Triton is optional, and loads torch; this module runs before torch.
        import triton  # noqa: F401
    except Exception:  # not installed, or broken: the solution's own import says so
        return
    if select.select([sock], [], [], grace)[0]:
        return  # the task is here
    try:
        from triton.runtime.cache import triton_key  # as triton above

        triton_key()
    except Exception:  # only a head start
        return
    mark("worker", "triton")


def settle_context(device: str, early: threading.Thread | None = None) -> None:
    """Create the CUDA context (CUDA's start sets environment variables, which must not read
    as the solution's doing). Called when the first task arrives, not at start-up: a spare
    worker booting beside a timed one must not touch the GPU. ``early``: the thread of
    :func:`open_context_early`, waited for first."""
    if early is not None:
        early.join()
    if not device.startswith("cuda"):
        return
    # Imported here: this module is what a process starts before it imports torch (~3 s).
    import torch

    torch.empty(1, device=device).add_(1)
    torch.cuda.synchronize(device)


@dataclass
class HeadStart:
    """What a worker or judge starts before importing torch, so that it runs during the
    import (about 1.5 s) instead of after it: the CUDA context (:func:`open_context_early`)
    and ``nvidia-smi`` (:func:`fib_core.bench.evaluation.environment.start_smi`)."""

    context: threading.Thread | None = None
    smi: Any = None

    @classmethod
    def begin(cls, requested_device: str, context: bool) -> HeadStart:
        """Settle the environment, then start both (the context only when ``context``)."""
        settle_environment()  # before the context thread: the driver reads the environment
        index = device_index(requested_device)
        return cls(open_context_early(requested_device) if context else None,
                   start_smi(index) if index is not None else None)
