"""Several GPUs for one run: one shard per GPU, workloads spread by cost, results in order.

``run_local.py`` uses every visible GPU (``--gpus 0,1`` or ``--gpus 1`` to choose). Each GPU
gets its own child process, started fresh (spawn) with ``CUDA_VISIBLE_DEVICES`` naming that
GPU alone, and runs the usual :func:`fib_core.project.runflow.execute` on its share: its own
persistent worker, its own build and reference caches in memory (the disk caches are shared;
their writes are atomic). The parent forwards the children's progress events and merges the
shards in the selection's order, so the table reads as a one-GPU run's.

Example::

    gpus = parse_gpus("0,1", visible=2)                 # [0, 1]
    bins = spread_by_cost([5.0, 1.0, 1.0, 3.0], 2)      # [[0], [1, 2, 3]]
    shards = run_on_gpus(request, gpus, on_event=print)
"""

from __future__ import annotations

import os
import queue as queue_module
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from fib_core.errors import ConfigError, FibError

# A workload's cost in the spreading heuristic: a fixed part (worker round trip, inputs,
# checks) plus a part that grows with its roofline size (kernels, reference, transfers).
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


def spread_by_cost(costs: Sequence[float], bins: int) -> list[list[int]]:
    """Indices of ``costs`` in ``bins`` groups of near-equal total cost (largest first, each to
    the least-loaded group; ties to the lower group), each group in the original order."""
    if bins < 1:
        raise ValueError("bins must be >= 1")
    loads = [0.0] * bins
    groups: list[list[int]] = [[] for _ in range(bins)]
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        target = min(range(bins), key=lambda b: (loads[b], b))
        groups[target].append(i)
        loads[target] += costs[i]
    return [sorted(g) for g in groups]


def workload_costs(definition: str, axes_list: Sequence[dict[str, int]]) -> list[float]:
    """Relative cost of each workload for spreading (equal when the definition has no model)."""
    from fib_core.dataset.roofline import workload_cost

    try:
        sizes = []
        for axes in axes_list:
            cost = workload_cost(definition, axes)
            sizes.append(float(cost.bytes + cost.flops))
    except KeyError:
        return [FIXED_SHARE] * len(axes_list)
    top = max(sizes, default=0.0) or 1.0
    return [FIXED_SHARE + SIZE_SHARE * s / top for s in sizes]


def physical_ids(gpus: Sequence[int], env: dict[str, str] | None = None) -> list[str]:
    """What each chosen index means in ``CUDA_VISIBLE_DEVICES`` for a child: the parent's own
    list entry when it has one (indices count within what the parent sees)."""
    env = os.environ if env is None else env
    listed = [p.strip() for p in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if p.strip()]
    return [listed[g] if g < len(listed) else str(g) for g in gpus]


def plan_shards(
    request: Any, selection_uuids: list[str], costs: list[float], gpus: Sequence[int]
) -> list[Any]:
    """One request per GPU with the uuids it runs (``assigned``), spread by ``costs``."""
    groups = spread_by_cost(costs, len(gpus))
    return [
        replace(
            request, shard=i, num_shards=len(gpus), assigned=[selection_uuids[k] for k in group]
        )
        for i, group in enumerate(groups)
    ]


def _child(request: Any, device_id: str, channel: Any, target: Callable | None) -> None:
    """Child process: this GPU only, then the usual shard execution; events go to the parent."""
    os.environ["CUDA_VISIBLE_DEVICES"] = device_id
    try:
        if target is None:  # the real run: its judge and worker boot while this one imports
            from fib_core.bench.pool import launch_early

            launch_early(request.device or "auto", request.dataset_path)
            from fib_core.project.runflow import execute as target
        shard = target(request, on_event=lambda event: channel.put(("event", event)))
        channel.put(("result", shard))
    except FibError as err:  # a user mistake: one line, as in a one-GPU run
        channel.put(("error", f"GPU {device_id}: {err}"))
    except BaseException:  # a kit bug: its traceback goes to the parent
        import traceback

        channel.put(("bug", f"GPU {device_id}:\n{traceback.format_exc()}"))
    finally:  # a multiprocessing child runs no atexit hooks
        from fib_core.bench.pool import discard_early

        discard_early(remove_logs=True)


def run_on_gpus(
    requests: Sequence[Any],
    device_ids: Sequence[str],
    on_event: Callable[[Any], None] | None = None,
    target: Callable | None = None,
) -> list[Any]:
    """Run each request in its own process on its GPU; the ShardResults, in shard order.

    ``target(request, on_event=...)`` (a module-level function; default ``runflow.execute``)
    is what each child runs."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    channel = ctx.Queue()
    procs = [
        ctx.Process(target=_child, args=(req, dev, channel, target), daemon=False)
        for req, dev in zip(requests, device_ids, strict=True)
    ]
    for proc in procs:
        proc.start()
    results: list[Any] = []
    errors: list[str] = []
    bugs: list[str] = []
    try:
        while len(results) + len(errors) + len(bugs) < len(procs):
            try:
                kind, payload = channel.get(timeout=1.0)
            except queue_module.Empty:
                if all(not p.is_alive() for p in procs) and channel.empty():
                    errors.append("a GPU process ended without a result (see its output above)")
                continue
            if kind == "event":
                if on_event is not None:
                    on_event(payload)
            elif kind == "result":
                results.append(payload)
            elif kind == "bug":
                bugs.append(payload)
            else:
                errors.append(payload)
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
                proc.join()
    if bugs:
        raise RuntimeError("a GPU process failed:\n" + bugs[0])
    if errors:
        raise FibError(errors[0])
    return sorted(results, key=lambda s: s.shard)
