"""The judge and first worker of the next run, started before the launcher needs them.

A launcher's own start (importing torch, loading the dataset, packing the solution) takes
seconds, and so does each child's boot; started here first, they overlap. The engine adopts a
prestarted process only when it was started as the engine would start it now (role, device,
sandbox paths, checking mode, cache folder); the rest are killed at exit.
"""

from __future__ import annotations

import atexit
import shutil
from pathlib import Path

from fib_core.bench.containment.mounts import Mounts, worker_mounts
from fib_core.bench.engine.judge_process import JudgeHandle
from fib_core.bench.engine.pool import WorkerHandle, default_log_dir, trusted_checks
from fib_core.paths import cache_dir

_EARLY: list[WorkerHandle] = []
_EARLY_DIRS: list[Path] = []


def launch_early(device: str, dataset_root: str | Path | None) -> None:
    """Start the judge and the first worker now, for the Benchmark that will run next.

    A launcher calls this before it imports torch, loads its dataset and packs the solution:
    the two processes boot (interpreter, torch, libraries: seconds on a GPU machine) side by
    side with that work instead of after it. A Benchmark adopts them when they match what it
    would start itself (role, device, sandbox paths, checking mode; see :func:`take_early`);
    whatever is not adopted is killed at exit (or by :func:`discard_early`). The worker makes
    its CUDA context while it boots (nothing of this run uses the GPU yet); a worker adopted
    here has served nothing: an isolated run's first workload gets a fresh process as always.

    Example: ``launch_early("auto", "/path/to/dataset")`` at the top of a launcher's main.
    """
    mounts = worker_mounts(dataset_root)
    trusted = trusted_checks()
    if _early_standing(device, mounts, trusted):
        return  # the last launch's, unused and alive (a watch after a run that failed early)
    discard_early()  # left over from an earlier launch that no run took: not for this one
    log_dir = default_log_dir()
    _EARLY_DIRS.append(log_dir)
    handles = [WorkerHandle(device, log_dir, mounts=mounts, trusted=trusted,
                            context_at_start=True)]
    if not trusted:
        handles.append(JudgeHandle(device, log_dir))
    for handle in handles:
        handle.early_environment = environment_print()
        try:
            handle.launch()
        except OSError:  # could not even spawn: the Benchmark will start its own and say why
            continue
        _EARLY.append(handle)
    if len(_EARLY_DIRS) == 1:
        atexit.register(discard_early, True)


def _launched_with(handle: WorkerHandle, mounts: Mounts, trusted: bool) -> bool:
    """Whether an early process is alive and was launched with this sandbox and checking mode
    under this cache folder (a judge: with none of a worker's, ``Mounts()`` and False)."""
    return (
        handle.early_environment == environment_print()
        and handle.mounts == mounts
        and handle.trusted == trusted
        and handle.alive
    )


def _early_standing(device: str, mounts: Mounts, trusted: bool) -> bool:
    """Whether the processes a launch with these settings would start already stand ready:
    each role once, alive, launched for this device with the same settings."""
    roles = ["worker"] if trusted else ["judge", "worker"]
    if sorted(h.role for h in _EARLY) != roles:
        return False
    return all(
        h.requested_device == device
        and (_launched_with(h, Mounts(), False) if h.role == "judge"
             else _launched_with(h, mounts, trusted))
        for h in _EARLY
    )


def take_early(role: str, device: str, mounts: Mounts | None = None,
               trusted: bool = False) -> WorkerHandle | None:
    """The early-launched process of ``role`` if it fits a Benchmark on ``device`` with these
    sandbox paths and checking mode (it is then the caller's), else None. A process launched
    with device "auto" fits either kind: it resolves "auto" as the launcher did. Both roles
    must also have been launched under the same cache folder (the judge signs and verifies
    with that folder's key, a worker's sandbox protects that folder). An early worker that
    does not fit is killed then: it made its CUDA context as it booted, and a run adopts its
    first worker once, so it would hold that context, unused, until the launcher exits."""
    for handle in _EARLY:
        if (handle.role == role and handle.requested_device in (device, "auto")
                and _launched_with(handle, mounts if mounts is not None else Mounts(), trusted)):
            _EARLY.remove(handle)
            return handle
    for handle in [h for h in _EARLY if h.role == role == "worker"]:
        _EARLY.remove(handle)
        handle.kill()
    return None


def environment_print() -> str:
    """What a process started ahead of its run took from the environment: the cache folder
    (its judge signs with that folder's key, its worker's sandbox protects that folder)."""
    return str(cache_dir().resolve())


def discard_early(remove_logs: bool = False) -> None:
    """Kill every early-launched process no Benchmark adopted. ``remove_logs`` (at exit, when
    the adopted ones are stopped too) also removes their log folder."""
    while _EARLY:
        _EARLY.pop().kill()
    if remove_logs:
        for folder in _EARLY_DIRS:
            shutil.rmtree(folder, ignore_errors=True)
