"""Turning worker results into FlashInfer-Trace records, and what ``--resume`` may skip.

Kept apart from the runner so the mapping (status -> which metrics are present; our extras ->
extra keys) lives in one place. Extras are made JSON-safe here (no NaN/inf floats), so the
traces file stays strict JSON that other tools load.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fib_core.bench.evaluation.protocol import EvalResult
from fib_core.data.json_io import json_safe
from fib_core.data.trace import Correctness, Evaluation, EvaluationStatus, Performance, Trace


def make_trace(
    definition: Any, workload: Any, solution: Any, result: EvalResult, environment: Any
) -> Any:
    """The Trace for one evaluated (solution, workload) pair."""
    correctness = performance = None
    if (
        result.status in (EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL)
        and result.correctness is not None
    ):
        raw = dict(result.correctness)
        raw["extra"] = json_safe(raw.get("extra")) if raw.get("extra") is not None else None
        correctness = Correctness.from_dict(raw)
    if result.status == EvaluationStatus.PASSED and result.performance is not None:
        performance = Performance.from_dict(json_safe(result.performance))
    status = result.status
    if status == EvaluationStatus.INCORRECT_NUMERICAL and correctness is None:
        correctness = Correctness(float("inf"), float("inf"), extra={"note": "not measured"})
    evaluation = Evaluation(
        status=status,
        log=result.log,
        environment=environment,
        timestamp=datetime.now(UTC).isoformat(timespec="seconds"),
        correctness=correctness,
        performance=performance,
        extra=json_safe(result.extra),
    )
    return Trace(
        definition=definition.name, workload=workload, solution=solution.name, evaluation=evaluation
    )


def finished_pairs(
    trace_set: Any, definition_name: str
) -> dict[tuple[str, str], list[tuple[str | None, str | None]]]:
    """(solution name, workload uuid) -> [(solution hash, device kind)] of every evaluated trace."""
    done: dict[tuple[str, str], list[tuple[str | None, str | None]]] = {}
    for trace in trace_set.traces.get(definition_name, []):
        if trace.solution is None or trace.evaluation is None:
            continue
        extra = trace.evaluation.extra
        done.setdefault((trace.solution, trace.workload.uuid), []).append(
            (extra.get("solution_hash"), extra.get("device"))
        )
    return done


def is_finished(
    done: dict[tuple[str, str], list[tuple[str | None, str | None]]],
    solution: Any,
    uuid: str,
    device_kind: str | None = None,
) -> bool:
    """A pair is finished if a trace exists for it from this solution (same hash, when
    recorded) on this kind of device (when recorded): a CPU smoke run's trace does not stand in
    for a GPU measurement, nor an edited kernel's for the new one."""
    for recorded_hash, recorded_device in done.get((solution.name, uuid), []):
        same_code = recorded_hash is None or recorded_hash == solution.hash()
        same_device = device_kind is None or recorded_device in (None, device_kind)
        if same_code and same_device:
            return True
    return False
