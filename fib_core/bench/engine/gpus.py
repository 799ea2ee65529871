"""Several GPUs for one run: one process per GPU, taking workloads from one shared queue.

``run_local.py`` uses every visible GPU (``--gpus 0,1`` or ``--gpus 1`` to choose). Each GPU
gets its own child process, started fresh (spawn) with ``CUDA_VISIBLE_DEVICES`` naming that
GPU alone, and runs the engine's one-shard execution (:func:`.shard_run.execute`, the usual
one-GPU run), taking its workloads one at a time from a queue the GPUs share
(:mod:`.work_queue`: size order, one GPU from each end; the processes themselves:
:mod:`.gpu_processes`), each with its own persistent worker and its own build and reference
caches in memory (the disk caches are shared; their writes are atomic). The parent forwards the
children's progress events, numbered across GPUs, and merges their traces in the selection's
order, so the table reads as a one-GPU run's. A launcher calls :func:`start_early` first, so
that these processes (or, on one GPU, the run's judge and first worker) boot while it imports
torch, loads the dataset and packs.

The engine imports nothing of the launcher, and calls nothing of it: a launcher hands its
request down to :func:`execute_on_gpus` and adds what it adds (the FlashInfer baseline's
figures) to the shards it gets back.

Example (the plan; ``run_on_gpus(plan_queue(request, selection, 2), physical_ids([0, 1]))``
then runs it; ``execute_on_gpus(request, "0,1")`` does all of it):

>>> parse_gpus("0,1", visible=2)
[0, 1]
>>> physical_ids([1], {"CUDA_VISIBLE_DEVICES": "4,5"})
['5']
"""

from __future__ import annotations

import atexit
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from fib_core.bench.engine.gpu_processes import ShardFunction, ShardProcesses
from fib_core.bench.engine.prestart import discard_early, launch_early
from fib_core.bench.engine.shard_run import (
    RunRequest,
    ShardResult,
    execute,
    load_dataset,
    select_for,
)
from fib_core.bench.engine.work_queue import QueuePlan, queue_plan
from fib_core.bench.evaluation.environment import visible_entries
from fib_core.bench.evaluation.timeline import mark
from fib_core.dataset.roofline import workload_size
from fib_core.errors import ConfigError
from fib_core.paths import torch_package_dir

# A workload's cost, for cutting the queue into lanes of near-equal work: a fixed part (worker
# round trip, inputs, checks) plus a part that grows with its roofline size (kernels,
# reference, transfers). Only a guess: the GPUs of a lane meet wherever its work splits.
FIXED_SHARE = 1.0
SIZE_SHARE = 10.0


def parse_gpus(text: str | None, visible: int) -> list[int]:
    """GPU indices from ``--gpus`` ("0,1", "1", "all"; None = all visible), checked."""
    if visible < 1:
        raise ConfigError("--gpus: torch sees no CUDA GPU here; drop --gpus (a CPU run uses none)")
    if text is None or text.strip().lower() == "all":
        return list(range(visible))
    chosen: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit():
            raise ConfigError(f"--gpus {text}: {part!r} is not a GPU index; use e.g. --gpus 0,1")
        index = int(part)
        if index >= visible:
            raise ConfigError(
                f"--gpus {text}: GPU {index} does not exist; this machine shows {visible} "
                f"(0..{visible - 1})"
            )
        if index not in chosen:
            chosen.append(index)
    if not chosen:
        raise ConfigError(f"--gpus {text!r}: name at least one GPU index, e.g. --gpus 0")
    return chosen


def gpus_for_run(device: str | None, gpus: str | None) -> list[str] | None:
    """The GPUs a run on ``device`` ("cuda" | "cpu") takes from ``--gpus``, one process each,
    as their ``CUDA_VISIBLE_DEVICES`` entries (:func:`physical_ids`); None when the run stays
    in the launcher's process (a CPU run, or one GPU that nobody named). The processes started
    early that this run will not use are stopped here, so the launcher asks the engine once.

    Example: ``gpus_for_run("cuda", "1")`` gives ``["5"]`` where ``CUDA_VISIBLE_DEVICES=4,5``."""
    if device != "cuda":
        if gpus is not None:
            raise ConfigError("--gpus needs a CUDA GPU; this run is on the CPU")
        discard_prestarted()
        return None
    import torch  # only a GPU run pays for it, and its launcher has imported it by now

    chosen = parse_gpus(gpus, torch.cuda.device_count())
    if len(chosen) == 1 and gpus is None:
        discard_prestarted()
        return None
    discard_early()  # each GPU's process has its own; none started here is used
    return physical_ids(chosen)


def workload_costs(definition: str, axes_list: Sequence[dict[str, int]]) -> list[float]:
    """Relative cost of each workload, from its roofline size (equal when the definition has
    no cost model)."""
    try:
        sizes = [workload_size(definition, axes) for axes in axes_list]
    except KeyError:
        return [FIXED_SHARE] * len(axes_list)
    top = max(sizes, default=0.0) or 1.0
    return [FIXED_SHARE + SIZE_SHARE * s / top for s in sizes]


def physical_ids(gpus: Sequence[int], env: dict[str, str] | None = None) -> list[str]:
    """What each chosen index means in ``CUDA_VISIBLE_DEVICES`` for a child: the parent's own
    list entry when it has one (indices count within what the parent sees)."""
    listed = visible_entries(os.environ if env is None else env) or []
    return [listed[g] if g < len(listed) else str(g) for g in gpus]


def plan_queue(request: Any, selection: Sequence[Any], gpus: int) -> QueuePlan:
    """The plan for ``request`` on ``gpus`` GPUs: ``selection`` (its workload records) in the
    queue's size order, lanes of near-equal cost by :func:`workload_costs`."""
    axes = [dict(t.workload.axes) for t in selection]
    order, lanes = queue_plan(workload_costs(request.definition, axes), axes, gpus)
    requests = [replace(request, shard=i, num_shards=gpus, queue=order) for i in range(gpus)]
    return QueuePlan(requests, lanes)


def visible_gpu_count() -> int | None:
    """How many GPUs torch will see, read without importing torch; None when that cannot be
    told (no NVIDIA driver folder, or a torch built without CUDA). A launcher uses it to
    start one process per GPU before its own torch import; torch's count still decides the
    run, and processes started for GPUs it does not use are stopped.

    ``CUDA_VISIBLE_DEVICES`` is read as CUDA reads it
    (:func:`fib_core.bench.evaluation.environment.visible_entries`), up to the driver's own count."""
    if not _torch_has_cuda():
        return None
    installed = _installed_gpus()
    listed = visible_entries(os.environ)
    if listed is None:
        return installed
    return len(listed) if installed is None else min(len(listed), installed)


def _installed_gpus() -> int | None:
    """The NVIDIA driver's count of this machine's GPUs (Linux), None without a driver."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return None


def _torch_has_cuda() -> bool:
    """Whether the installed torch was built with CUDA, read from its ``version.py`` without
    importing it (a CPU build on a GPU machine runs on the CPU: no GPU processes then)."""
    folder = torch_package_dir()
    try:
        text = (folder / "version.py").read_text(encoding="utf-8") if folder else ""
    except OSError:
        return True  # unknown: torch decides later
    return re.search(r"^cuda\b[^=\n]*=\s*None\s*$", text, re.MULTILINE) is None


_prestarted: ShardProcesses | None = None
_exit_hook_registered = False


def start_early(device: str | None, gpus: str | None, dataset_root: str | Path | None) -> None:
    """What a launcher calls first, before it imports torch: the processes of the run it is
    about to make start booting now (seconds: interpreter, torch, CUDA context), side by side
    with its own imports, dataset and packing.

    Several GPUs (``gpus`` lists more than one, or none is named and more than one is
    visible): one :class:`ShardProcesses` child per GPU, which :func:`run_on_gpus` uses when
    the run's GPUs and settings are these. Otherwise, one GPU or unknown: the judge and first
    worker of a one-GPU run (:func:`fib_core.bench.engine.prestart.launch_early`).
    ``device``: the ``--device`` flag (None = auto); "cpu" starts only the CPU run's
    processes.

    Example: ``start_early(None, "0,1", "/path/to/dataset")`` at the top of a launcher's main.
    """

    mark("launcher", "start_early")
    ids = None if device == "cpu" else _early_device_ids(gpus)
    root = None if dataset_root is None else str(dataset_root)
    if ids is None:
        discard_prestarted()
        launch_early(device or "auto", root)
        return
    prestart(physical_ids(ids), device or "auto", root)


def prestart(device_ids: Sequence[str], device: str, dataset_root: str | None,
             run_shard: ShardFunction = execute) -> None:
    """Start one :class:`ShardProcesses` child per GPU of ``device_ids`` for the next
    :func:`run_on_gpus` on those GPUs (``run_shard``: what they run, as there), in place of
    any started before with other settings (those started with the same ones and still
    waiting are kept); stopped at exit if no run takes them."""
    global _prestarted, _exit_hook_registered
    if _prestarted is not None and _prestarted.standing(device_ids, device, dataset_root,
                                                        run_shard):
        return  # the last prestart's, unused and alive (a watch after a run that failed early)
    discard_prestarted()
    if not _exit_hook_registered:
        import multiprocessing.util  # noqa: F401  its exit hook (which waits for children)
        # is registered now, so this one, registered after it, runs before it
        atexit.register(discard_prestarted)
        _exit_hook_registered = True
    _prestarted = ShardProcesses(device_ids, device, dataset_root, run_shard)


def _early_device_ids(gpus: str | None) -> list[int] | None:
    """The GPU indices a run on ``gpus`` will use, read without torch; None when it will be a
    one-GPU run in this process, or when it cannot be told yet."""
    visible = visible_gpu_count()
    if not visible:
        return None
    try:
        chosen = parse_gpus(gpus, visible)
    except ConfigError:  # the run itself says what is wrong, in one line
        return None
    if len(chosen) == 1 and gpus is None:
        return None
    return chosen


def discard_prestarted() -> None:
    """Stop the prestarted GPU processes that no run took."""
    global _prestarted
    shards, _prestarted = _prestarted, None
    if shards is not None:
        shards.close()


def run_on_gpus(
    plan: QueuePlan,
    device_ids: Sequence[str],
    on_event: Callable[[Any], None] | None = None,
    *,
    run_shard: ShardFunction = execute,
) -> list[Any]:
    """Run ``plan`` with one process per GPU of ``device_ids`` (one per request, in order);
    the ShardResults, in shard order.

    The processes :func:`start_early` prestarted serve when :meth:`ShardProcesses.fits` says
    so (same GPUs, shard function, device, dataset and cache folder), else they are stopped
    and new ones start. ``run_shard(request, on_event=..., queue=...)`` is what each child
    runs (``queue``: that GPU's :class:`QueueTaker`): the engine's :func:`execute`, whose
    judge and worker start booting before the engine is imported; or a stand-in module-level
    function with nothing started early (the tests of the processes)."""
    global _prestarted
    if len(plan.requests) != len(device_ids):
        raise ValueError(f"{len(plan.requests)} requests for {len(device_ids)} GPUs")
    first = plan.requests[0]
    shards = _prestarted if _prestarted is not None and \
        _prestarted.fits(device_ids, run_shard, first) else None
    if shards is not None:
        _prestarted = None
    discard_prestarted()
    if shards is None:
        shards = ShardProcesses(device_ids, first.device or "auto", first.dataset_path,
                                run_shard)
    return shards.run(plan, on_event)


def execute_on_gpus(
    request: RunRequest,
    gpus: str | None,
    on_event: Callable[[Any], None] | None = None,
    trace_set: Any = None,
) -> list[ShardResult]:
    """Benchmark ``request`` on the GPUs of this machine ``gpus`` names ("0,1", "1", None =
    every visible one): one process per GPU, each taking workloads from the queue they share.
    One GPU, or a CPU run, is :func:`execute` here (on ``trace_set`` when given); which of the
    two, :func:`gpus_for_run` says. The ShardResults, in shard order.

    Example: ``finish(execute_on_gpus(request, "0,1"), definition, opts)`` in a launcher."""
    ids = gpus_for_run(request.device, gpus)
    if ids is None:
        return [execute(request, on_event=on_event, trace_set=trace_set)]
    _, trace_set = load_dataset(request, trace_set)
    selection = select_for(request, trace_set, "cuda")
    return run_on_gpus(plan_queue(request, selection, len(ids)), ids, on_event=on_event)


def first_gpu(gpus: str | None, visible: int | None = None) -> str | None:
    """``CUDA_VISIBLE_DEVICES`` naming only the first GPU a run on ``gpus`` used ("1" for
    ``--gpus 1,0``; None when none is named: the processes see what this one sees). A launcher
    sets it while it starts what it measures once for all its GPUs (the FlashInfer baseline):
    the engine's settings name a device kind ("cuda"), its processes take the GPU they see.
    ``visible``: how many GPUs this process sees (None: ask torch).

    >>> first_gpu(None) is None, first_gpu("1,0", visible=2)
    (True, '1')
    """
    if gpus is None:
        return None
    if visible is None:
        # Imported here: only a GPU run asks, and its launcher has imported torch by now.
        import torch

        visible = torch.cuda.device_count()
    return physical_ids(parse_gpus(gpus, visible)[:1])[0]
