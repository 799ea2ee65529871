"""The reference, paid once: which input sets a run checks, their outputs, and its latency.

A run checks a fixed, seeded set of inputs: the ``checked`` sets (0 .. checked-1, compared
before timing) and a *re-check pool* (the next ``2 * trials`` sets), whose contents go to the
timed calls that are re-checked (the last call of each trial and one call per trial chosen at
random). Because the pool does not change from run to run, every set a run may check has its
reference outputs on disk after the first run; later runs load them instead of calling the
reference.

The reference's latency comes from the same calls that produce those outputs: the first
``timed_calls`` sets are computed by the definition's own reference, each call timed alone
(CUDA events around it, L2 flushed before; wall clock on CPU); the first of several warms up
and the latency is the median of the rest. The other sets may come from a faster reference of
the same arithmetic (:func:`fib_core.bench.reference.fast_reference_for`). The latency is cached
beside the outputs, per GPU; only when outputs are cached but the latency is not (another GPU)
are the timed calls made again.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fib_core.bench.timing import spread

REFERENCE_TIMING_VERSION = "output-calls-1"


def recheck_pool_size(num_trials: int) -> int:
    """Sets reserved for re-checked timed calls: the last and one sampled call per trial."""
    return 2 * num_trials


def checked_indices(n_sets: int, checked: int, num_trials: int) -> list[int]:
    """Every input set whose reference a run needs: the checked sets then the re-check pool
    (fewer when memory allowed fewer sets)."""
    return list(range(min(n_sets, checked + recheck_pool_size(num_trials))))


def timed_set_order(
    n_sets: int, checked: int, rechecked_calls: Sequence[int], total: int
) -> list[int]:
    """The input set of every call made while timing (warm-up included), by call index.

    Re-checked calls (``rechecked_calls``, in order) get the pool sets ``checked, checked+1,
    ...``; the other calls take the remaining sets in turn, so no content repeats while there
    are enough sets. With too few sets for a pool (memory), every call takes the next set after
    the checked ones, cyclically, and re-checks use whatever set their call had.
    """
    pool = len(rechecked_calls)
    if n_sets >= checked + pool + 1:
        slot = {call: checked + j for j, call in enumerate(rechecked_calls)}
        free = list(range(checked + pool, n_sets))
        order, k = [], 0
        for i in range(total):
            if i in slot:
                order.append(slot[i])
            else:
                order.append(free[k % len(free)])
                k += 1
        return order
    offset = min(checked, n_sets - 1)
    return [(i + offset) % n_sets for i in range(total)]


@dataclass
class ReferenceRun:
    """Outputs of the needed sets plus the latency record (None when none could be taken)."""

    outputs: dict[int, list]
    latency_ms: float | None = None
    latency_extra: dict[str, Any] = field(default_factory=dict)
    computed: int = 0  # reference calls made (0: everything came from the cache)


def latency_record(samples_ms: list[float], method: str) -> tuple[float, dict[str, Any]]:
    """(latency, extra) from per-call samples: the first of several warms up, median of the
    rest."""
    used = samples_ms[1:] if len(samples_ms) >= 2 else list(samples_ms)
    stats = spread(used)
    extra = {
        "timing_method": method,
        "warmup_runs": len(samples_ms) - len(used),
        "iterations": len(used),
        "num_trials": 1,
        "spread": {"overall": stats, "trials": [stats]},
        "source": "the calls that produced the checked outputs",
    }
    return statistics.median(used), extra


def run_references(
    indices: Sequence[int],
    *,
    load: Callable[[int], list | None],
    store: Callable[[int, list], None],
    exact: Callable[[int], Callable[[], Any]],
    finish: Callable[[Any], list],
    fast: Callable[[int], list] | None,
    timed_calls: int,
    need_latency: bool,
    timer: Callable[[Callable[[], list]], tuple[list, float]],
    method: str,
) -> ReferenceRun:
    """Outputs of every set in ``indices``, cached where possible, and the latency.

    ``exact(k)`` returns the definition's reference call on set k, ready to run (inputs
    cloned), and ``finish`` turns its result into the output list; ``fast(k)`` computes set k
    with the fast reference; ``timer(fn)`` returns (fn's result, its time in ms). With ``need_latency`` the first
    ``timed_calls`` sets are computed (and timed) with the exact reference even if cached.
    """
    run = ReferenceRun({})
    samples: list[float] = []
    timed = set(list(indices)[:timed_calls]) if need_latency else set()
    for k in indices:
        cached = None if k in timed else load(k)
        if cached is not None:
            run.outputs[k] = cached
            continue
        if k in timed or fast is None:
            raw, ms = timer(exact(k))
            out = finish(raw)
            if need_latency:
                samples.append(ms)
        else:
            out = fast(k)
        run.computed += 1
        run.outputs[k] = out
        store(k, out)
    if samples:
        run.latency_ms, run.latency_extra = latency_record(samples, method)
    return run


def device_timer(device_kind: str, flush: Callable[[], None] | None) -> tuple[Callable, str]:
    """(timer, method): CUDA events around one call after an L2 flush, or the wall clock."""
    if device_kind != "cuda":

        def wall(fn: Callable[[], Any]) -> tuple[Any, float]:
            t0 = time.perf_counter()
            out = fn()
            return out, (time.perf_counter() - t0) * 1e3

        return wall, "wall-clock"
    import torch

    def events(fn: Callable[[], Any]) -> tuple[Any, float]:
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        if flush is not None:
            flush()
        begin.record()
        out = fn()
        end.record()
        end.synchronize()
        return out, begin.elapsed_time(end)

    return events, "events"
