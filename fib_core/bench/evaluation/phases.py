"""Where a workload's time goes: per-phase wall time in the worker, and a run's breakdown.

The worker's evaluation announces phases (build, inputs, reference, run, timing,
reference-timing); :class:`PhaseClock` turns those announcements into seconds per phase, kept
in the trace (``evaluation.extra.phase_seconds``). :func:`harness_breakdown` sums them over a
run and sets them against the GPU time the measurements themselves account for, which is what
``run_local.py --profile-harness`` and ``benchmarks/bench_turnaround.py`` print.

Example::

    rows = harness_breakdown(traces)
    print(format_breakdown(rows, wall_s=12.3))
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

PHASES = ("setup", "build", "inputs", "reference", "run", "timing", "reference-timing")


class PhaseClock:
    """Seconds per phase from a sequence of ``enter(name)`` calls (repeats accumulate)."""

    def __init__(self, started: float | None = None) -> None:
        self._current = "setup"
        self._since = time.perf_counter() if started is None else started
        self._seconds: dict[str, float] = {}

    def enter(self, name: str, now: float | None = None) -> None:
        now = time.perf_counter() if now is None else now
        self._seconds[self._current] = self._seconds.get(self._current, 0.0) + now - self._since
        self._current, self._since = name, now

    def finish(self, now: float | None = None) -> dict[str, float]:
        """Close the current phase; seconds per phase, rounded to 0.1 ms."""
        self.enter("done", now)
        return {k: round(v, 4) for k, v in self._seconds.items() if k != "done"}


def _fields(trace: Any) -> tuple[dict[str, Any], float, dict[str, Any]]:
    """(evaluation extras, latency ms or 0, performance extras) of a Trace or its JSON dict
    (where the extras sit beside the standard fields)."""
    evaluation = getattr(trace, "evaluation", None) if not isinstance(trace, dict) else None
    if evaluation is not None:
        perf = evaluation.performance
        if perf is None:
            return dict(evaluation.extra or {}), 0.0, {}
        return dict(evaluation.extra or {}), float(perf.latency_ms), dict(perf.extra or {})
    data = trace if isinstance(trace, dict) else {}
    ev = data.get("evaluation") or {}
    perf = ev.get("performance") or {}
    extra = {**ev, **(ev.get("extra") or {})}
    perf_extra = {**perf, **(perf.get("extra") or {})}
    return extra, float(perf.get("latency_ms") or 0.0), perf_extra


def harness_breakdown(traces: Iterable[Any]) -> dict[str, float]:
    """Totals over ``traces`` (Trace objects or their dicts): seconds per phase, the worker's
    total, and ``gpu_solution_s``: the solution's measured latency times the calls made to
    time it (the part of the run that is the GPU measuring)."""
    totals: dict[str, float] = {p: 0.0 for p in PHASES}
    totals.update({"worker_total": 0.0, "gpu_solution_s": 0.0, "workloads": 0})
    for trace in traces:
        extra, latency_ms, perf = _fields(trace)
        totals["workloads"] += 1
        for name, seconds in (extra.get("phase_seconds") or {}).items():
            totals[name] = totals.get(name, 0.0) + float(seconds)
        totals["worker_total"] += float(extra.get("harness_seconds", 0.0))
        calls = int(perf.get("warmup_runs", 0)) + int(perf.get("iterations", 0)) * int(
            perf.get("num_trials", 0)
        )
        totals["gpu_solution_s"] += latency_ms * calls / 1e3
    return totals


def format_breakdown(
    totals: dict[str, float], wall_s: float | None = None, device: str = "cuda", gpus: int = 1
) -> str:
    """A small text table of :func:`harness_breakdown`'s totals (and the run's wall time).
    On the CPU (``device="cpu"``) the timed calls are wall-clock calls of the interpreter, so
    they are named as such and no harness share is worked out from them. With ``gpus`` > 1
    the workers ran side by side, one per GPU, so the phases add up to more than the wall
    time: shares are of the GPUs' wall time together (``gpus`` x wall)."""
    lines = [f"harness breakdown over {int(totals.get('workloads', 0))} workload(s):"]
    span = wall_s * max(gpus, 1) if wall_s else None
    base = span if span else totals.get("worker_total", 0.0)
    for name, seconds in totals.items():
        if name in ("workloads", "worker_total", "gpu_solution_s") or not seconds:
            continue
        share = f"{100 * seconds / base:5.1f} %" if base else ""
        lines.append(f"  {name:<18} {seconds:9.2f} s {share}")
    lines.append(f"  {'worker total':<18} {totals.get('worker_total', 0.0):9.2f} s")
    gpu = totals.get("gpu_solution_s", 0.0)
    cpu = device == "cpu"
    label = "timed calls (CPU)" if cpu else "GPU (timed calls)"
    lines.append(f"  {label:<18} {gpu:9.3f} s  (solution latency x calls made"
                 + (", wall-clock on the CPU)" if cpu else ")"))
    if span:
        outside = span - totals.get("worker_total", 0.0)
        several = f" x {gpus} GPUs" if gpus > 1 else ""
        waits = "; and a GPU's wait for the others' last workload" if gpus > 1 else ""
        lines.append(
            f"  {'outside the worker':<18} {outside:9.2f} s  (start-up, imports, dataset, "
            f"traces{waits})"
        )
        share = "" if cpu else f"; harness share {100 * (1 - gpu / span):.1f} %"
        lines.append(f"  {'run wall time':<18} {wall_s:9.2f} s{several}{share}")
    return "\n".join(lines)
