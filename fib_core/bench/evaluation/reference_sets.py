"""The reference, paid once: which input sets a run checks, their outputs, and its latency.

A run checks a fixed, seeded set of inputs: the ``checked`` sets (0 .. checked-1, compared
before timing) and a *re-check pool* (the next ``2 * trials`` sets), whose contents go to the
timed calls that are re-checked (the last call of each trial and one call per trial chosen at
random). Because the pool does not change from run to run, every set a run may check has its
reference outputs on disk after the first run; later runs load them instead of calling the
reference.

The reference's latency comes from the same calls that produce those outputs: the first
``timed_calls`` sets are computed by the definition's own reference, timed with the solution's
method (torch's profiler for the judge's CUPTI timer, except under ``--contest``) and the
judge's per-call protocol (:func:`fib_core.bench.evaluation.timers.reference_method`;
under ``--contest`` with the judge's counts, one set per trial); the latency is their median
(the mean of the trial medians). The first call of each
definition's reference in a process is made once more beforehand, untimed, so one-off costs
(library handles, allocator growth) are not charged to it; later workloads' calls are timed
as they come (a new shape's allocations are microseconds against a reference's
milliseconds). The other sets may come from a faster
reference of the same arithmetic (:func:`fib_core.bench.evaluation.reference.fast_reference_for`). The latency is cached
beside the outputs, per GPU; only when outputs are cached but the latency is not (another GPU)
are the timed calls made again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

REFERENCE_TIMING_VERSION = "judge-span-1"


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
    """Outputs of the needed sets plus the latency (None when none was taken)."""

    outputs: dict[int, list]
    latency_ms: float | None = None
    latency_extra: dict[str, Any] = field(default_factory=dict)
    computed: int = 0  # reference calls made (0: everything came from the cache)


MeasureFn = Callable[[list[int]], tuple[dict[int, list], float, dict[str, Any]]]


def run_references(
    indices: Sequence[int],
    *,
    load: Callable[[int], list | None],
    store: Callable[[int, list], None],
    measure_exact: MeasureFn,
    exact: Callable[[int], list],
    fast: Callable[[int], list] | None,
    timed_calls: int,
    need_latency: bool,
) -> ReferenceRun:
    """Outputs of every set in ``indices``, cached where possible, and the latency.

    ``measure_exact(ks)`` computes the sets ``ks`` with the definition's reference, timing the
    calls, and returns (outputs by set, latency ms, extra).
    With ``need_latency`` it runs on the first ``timed_calls`` sets even if they are cached.
    The other sets not on disk come from ``fast(k)`` when given, else from ``exact(k)``.
    """
    run = ReferenceRun({})
    timed = list(indices)[:timed_calls] if need_latency else []
    if timed:
        outputs, run.latency_ms, run.latency_extra = measure_exact(timed)
        run.latency_extra = {
            **run.latency_extra,
            "source": "the calls that produced the checked outputs",
        }
        for k in timed:
            run.outputs[k] = outputs[k]
            store(k, outputs[k])
        run.computed += len(timed)
    for k in indices:
        if k in run.outputs:
            continue
        cached = load(k)
        if cached is not None:
            run.outputs[k] = cached
            continue
        run.outputs[k] = (fast or exact)(k)
        run.computed += 1
        store(k, run.outputs[k])
    return run
