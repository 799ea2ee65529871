"""Traces -> result rows: the one place that knows where each figure sits inside a trace.

Traces come from the engine (``fib_core.data.Trace``); this module reads them by attribute only,
so it needs nothing from the engine at import time and works on any object of that shape.
The engine's own extras (timing spread, timing method, device) live in the ``extra`` dicts of
``performance`` and ``evaluation``; they are read leniently: a missing extra leaves a figure
unknown (None) rather than failing the report.

It makes rows (:class:`~fib_core.report.workload_result.WorkloadResult`) and picks the traces
of one run; the run itself is assembled by :meth:`fib_core.report.results.RunResults.from_traces`.

Example::

    chosen, solution = latest_traces(traces, "gdn_decode_qk4_v8_d128_k_last")
    rows = [row_from_trace(t) for t in chosen]
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from fib_core.compile.source_map import map_solution_paths
from fib_core.data.trace import EvaluationStatus
from fib_core.errors import FibError
from fib_core.report.attribution import reason_for
from fib_core.report.roofline_view import RooflineView
from fib_core.report.verdict_notes import decided_by
from fib_core.report.workload_result import LOG_TAIL_LINES, Spread, WorkloadResult

_ERROR_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(Error|Exception|Interrupt)|error|Error|Killed)\b")
_REASON_LIMIT = 200


def definition_name(definition: Any) -> str:
    return definition if isinstance(definition, str) else str(definition.name)


def latest_traces(
    traces: Iterable[Any], name: str, solution: str | None = None
) -> tuple[list[Any], str | None]:
    """The evaluated traces of definition ``name`` (and of ``solution`` when given), the newest
    one per workload in the first one's place, and the one solution they belong to; several
    solutions among them without ``solution`` to pick one is an error."""
    mine = [t for t in traces if t.definition == name and t.evaluation is not None]
    if solution is not None:
        mine = [t for t in mine if t.solution == solution]
    solutions = sorted({str(t.solution) for t in mine})
    if len(solutions) > 1:
        raise FibError(
            f"results for {name}: traces of several solutions ({', '.join(solutions)}); "
            "pass solution= to pick one"
        )
    latest: dict[str, Any] = {}
    for t in mine:  # measured twice: the later trace (newer run) wins, in the first one's place
        latest[t.workload.uuid] = t
    found = solution if solution is not None else (solutions[0] if solutions else None)
    return list(latest.values()), found


def row_from_trace(trace: Any, roofline: RooflineView | None = None) -> WorkloadResult:
    """Flatten one trace into a table row (figures a trace lacks stay None)."""
    ev = trace.evaluation
    status = str(getattr(ev.status, "value", ev.status))
    corr = ev.correctness
    perf = ev.performance
    perf_extra = _extra(perf)
    ev_extra = _extra(ev)
    latency = _float(getattr(perf, "latency_ms", None))
    log = map_solution_paths(ev.log or "")  # the solution's own files, not its build copy
    ref_ms = _float(getattr(perf, "reference_latency_ms", None))
    speedup = _float(getattr(perf, "speedup_factor", None))
    ref_timing = perf_extra.get("reference_timing")
    if isinstance(ref_timing, dict) and ref_timing.get("skipped"):
        ref_ms = speedup = None  # not measured (a CPU smoke run): unknown, not zero
    axes = {str(k): int(v) for k, v in dict(trace.workload.axes).items()}
    row = WorkloadResult(
        uuid=str(trace.workload.uuid),
        axes=axes,
        status=status,
        latency_ms=latency,
        reference_latency_ms=ref_ms,
        speedup=speedup,
        max_abs_error=_float(getattr(corr, "max_absolute_error", None)),
        max_rel_error=_float(getattr(corr, "max_relative_error", None)),
        reason="" if status == EvaluationStatus.PASSED else failure_reason(status, log, ev_extra),
        log_tail=[] if status == EvaluationStatus.PASSED else log_tail(log),
        spread=_spread(perf_extra),
        timing_method=_str(perf_extra.get("timing_method") or ev_extra.get("timing_method")),
        warnings=_warnings(ev_extra, perf_extra, _reference_note(ref_timing)),
        decided_by=decided_by(corr, status),
        samples=_samples(perf_extra),
        clocks=clocks_text(ev_extra.get("clocks")),
        l2_policy=_l2_policy(perf_extra, ev_extra) if latency is not None else None,
        busy_ms=_float(perf_extra.get("busy_ms")) if latency is not None else None,
    )
    if roofline is not None and latency:
        cost = perf_extra.get("cost")
        figures = roofline.figures(axes, latency, cost=cost)
        if figures is not None:
            row.floor_ms, row.roofline_fraction, row.achieved = figures
            dtype = cost.get("dtype") if isinstance(cost, dict) else None
            row.floor_peak = roofline.peak_label(row.achieved, str(dtype or "bfloat16"))
    return row


def clocks_text(clocks: Any) -> str | None:
    """The GPU clocks ``nvidia-smi`` reported to the worker, in one short line.

    >>> clocks_text({"clocks_sm": "1755", "clocks_max_sm": "1980", "clocks_mem": "2619"})
    'SM 1755/1980 MHz, mem 2619 MHz'
    """
    if not isinstance(clocks, dict):
        return None

    def mhz(key: str) -> str | None:
        value = str(clocks.get(key) or "").strip()
        return value if value and value[0].isdigit() else None  # "[N/A]" reads as unknown

    parts = []
    sm, sm_max = mhz("clocks_sm"), mhz("clocks_max_sm")
    if sm:
        parts.append(f"SM {sm}/{sm_max} MHz" if sm_max else f"SM {sm} MHz")
    mem = mhz("clocks_mem")
    if mem:
        parts.append(f"mem {mem} MHz")
    return ", ".join(parts) or None


def _l2_policy(perf_extra: dict[str, Any], ev_extra: dict[str, Any]) -> str:
    """What happened to the L2 cache between timed calls: the engine's own word when it
    records one, else its fixed rule (a GPU timer zeroes a buffer of twice the L2 before each
    call; the CPU's wall-clock timer touches no cache)."""
    for extra in (perf_extra, ev_extra):
        for key in ("l2_policy", "l2"):
            if isinstance(extra.get(key), str) and extra[key]:
                return str(extra[key])
    method = perf_extra.get("timing_method") or ev_extra.get("timing_method")
    cpu = method == "wall-clock" or str(ev_extra.get("device") or "").startswith("cpu")
    return "not flushed (CPU)" if cpu else "flushed before each call"


def failure_reason(status: str, log: str | None, extra: dict[str, Any]) -> str:
    """One line saying why a workload failed: the engine's own message, else the log's error line
    (a reference that was too slow or failed is named as the reference's, not the solution's)."""
    blamed = reason_for(status, log)
    if blamed is not None:
        return blamed
    for key in ("reason", "message", "error"):
        text = extra.get(key)
        if isinstance(text, str) and text.strip():
            return _one_line(text)
    lines = [ln for ln in (log or "").splitlines() if ln.strip()]
    errors = [ln for ln in lines if _ERROR_LINE.match(ln)]
    if errors:
        return _one_line(errors[-1])
    if lines:
        return _one_line(lines[-1])
    return status.replace("_", " ").lower()


def log_tail(log: str | None, n: int = LOG_TAIL_LINES) -> list[str]:
    """The last ``n`` non-empty lines of a log, right-trimmed."""
    lines = [ln.rstrip() for ln in (log or "").splitlines() if ln.strip()]
    return lines[-n:]


def _one_line(text: str) -> str:
    first = " ".join(text.strip().split())
    return first if len(first) <= _REASON_LIMIT else first[: _REASON_LIMIT - 3] + "..."


def environment(trace: Any) -> dict[str, Any]:
    """The trace's environment (``hardware`` and ``libs``) as a dict; empty when it has none."""
    env = getattr(trace.evaluation, "environment", None)
    if env is None:
        return {}
    if hasattr(env, "to_dict"):
        return dict(env.to_dict())
    return {"hardware": getattr(env, "hardware", None), "libs": dict(getattr(env, "libs", {}))}


def device_kind(traces: list[Any]) -> str:
    """ "cpu" when the engine says so (evaluation extra) or the hardware is a CPU, else "cuda"."""
    for t in reversed(traces):
        ev = t.evaluation
        dev = _extra(ev).get("device") or _extra(ev.performance).get("device")
        if isinstance(dev, str) and dev:
            return "cpu" if dev.lower().startswith("cpu") else "cuda"
        hardware = str(getattr(getattr(ev, "environment", None), "hardware", "") or "").lower()
        if hardware:
            return "cpu" if hardware.startswith("cpu") or "cpu" in hardware.split() else "cuda"
    return "cuda"


def _spread(extra: dict[str, Any]) -> Spread | None:
    """Read the spread from ``extra["spread"]["overall"]`` (the engine's layout: all timed calls
    of all trials), else from ``extra["spread"]`` or ``extra`` itself (flat keys)."""
    nested = extra.get("spread")
    overall = nested.get("overall") if isinstance(nested, dict) else None
    sources = [overall, nested, extra]
    found: dict[str, float | None] = {}
    for name in ("p10", "p90", "std", "min"):
        value = None
        for src in sources:
            if isinstance(src, dict):
                value = src.get(f"{name}_ms", src.get(name))
                if value is not None:
                    break
        number = _float(value)
        found[f"{name}_ms"] = number if number is not None and math.isfinite(number) else None
    if all(v is None for v in found.values()):
        return None
    return Spread(**found)


def _samples(extra: dict[str, Any]) -> int | None:
    """Timed calls behind the latency: iterations x trials, when the engine recorded them."""
    iterations, trials = extra.get("iterations"), extra.get("num_trials")
    if isinstance(iterations, int) and isinstance(trials, int):
        return iterations * trials
    return None


def _warnings(*extras: dict[str, Any]) -> list[str]:
    """The engine's warnings (``warnings``, ``timing_warnings``), one line each, no repeats."""
    out: list[str] = []
    for extra in extras:
        for key in ("warnings", "timing_warnings"):
            items = extra.get(key)
            if isinstance(items, str):
                items = [items]
            for item in items if isinstance(items, list) else []:
                line = _one_line(str(item))
                if line and line not in out:
                    out.append(line)
    return out


def _reference_note(ref_timing: Any) -> dict[str, Any]:
    """The reference timing's own note (how its method differs from the judge's), in the
    shape :func:`_warnings` reads."""
    note = ref_timing.get("method_note") if isinstance(ref_timing, dict) else None
    return {"warnings": [note]} if note else {}


def _extra(obj: Any) -> dict[str, Any]:
    extra = getattr(obj, "extra", None) if obj is not None else None
    return extra if isinstance(extra, dict) else {}


def _float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _str(value: Any) -> str | None:
    return str(value) if value else None


__all__ = [
    "clocks_text",
    "definition_name",
    "device_kind",
    "environment",
    "failure_reason",
    "latest_traces",
    "log_tail",
    "row_from_trace",
]
