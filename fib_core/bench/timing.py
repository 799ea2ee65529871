"""The organizers' timing helper, ``time_runnable``, over the kit's timers.

Code written for the organizers' ``flashinfer_bench.bench.timing`` imports this module; the
timers themselves (CUPTI, torch's profiler, CUDA events, wall-clock) live in
:mod:`fib_core.bench.evaluation.timers`, where the engine's worker uses them.
"""

from __future__ import annotations

from typing import Any

from fib_core.bench.evaluation.timers import choose_method, measure


def time_runnable(fn: Any, inputs: dict, warmup: int, iters: int, device: str) -> float:
    """Latency in ms of ``fn(**inputs)`` (the organizers' helper), measured by :func:`measure`.

    One trial of ``iters`` calls after the judge's untimed calls, with the method closest to
    the judge available on ``device`` (CUPTI, else torch's profiler, on a GPU; wall-clock on a
    CPU), the L2 flushed before each call; returns the trial's median. Example:
    ``time_runnable(runnable, {"x": x}, 3, 10, "cuda:0")``.
    """
    method, _ = choose_method("auto", device.split(":")[0])
    result = measure(
        lambda _i: fn(**inputs),
        lambda _i: None,
        device=device,
        method=method,
        warmup=warmup,
        iterations=iters,
        trials=1,
    )
    return result.latency_ms
