"""The engine's side of the verdicts: what it accepts from a worker and the judge, and the
result it records.

Runs in the launching process. Every message a worker sends is validated here before it is
used (:func:`validate_check`, :func:`validate_result`; the judge's reference timing:
:func:`validate_latency`); :class:`TaskLedger` remembers each verdict the judge gave, and
:func:`final_result` turns the worker's final report into the task's result: a worker may
report a failure on its own, but PASSED stands only if the judge passed every required check
(the rules of who decides what: :mod:`.judge`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from fib_core.bench.evaluation.judge import (
    ESSENTIAL_EXTRAS,
    MAX_EXTRA_BYTES,
    MAX_SETS,
    STATUSES,
    correctness_from,
)
from fib_core.bench.evaluation.logs import clip_text
from fib_core.bench.evaluation.protocol import EvalResult
from fib_core.bench.evaluation.wire import WireError, validate_values
from fib_core.data.trace import EvaluationStatus


@dataclass
class TaskLedger:
    """Every verdict the judge gave on one task, and the rules for the final result."""

    num_input_sets: int
    num_trials: int
    requests: int = 0  # check requests relayed
    checked_sets: set[int] = field(default_factory=set)
    timed_checks: int = 0
    first: dict | None = None  # the verdict on input set 0 (its correctness is reported)
    failure: dict | None = None  # the first failing verdict

    def admit(self) -> None:
        """Count a check request; WireError past what a run makes (the checked sets, then the
        last and one sampled call per trial): a worker flooding the judge is malformed."""
        self.requests += 1
        if self.requests > self.num_input_sets + 2 * self.num_trials:
            raise WireError("malformed check request (more checks than the run makes)")

    def record(self, header: dict, verdict: dict) -> None:
        if verdict["status"] != EvaluationStatus.PASSED:
            self.failure = self.failure or verdict
            return
        if header["label"] == "timed":
            self.timed_checks += 1
        else:
            self.checked_sets.add(header["set"])
        if header["set"] == 0 and header["label"] == "set" and self.first is None:
            self.first = verdict

    def passed_everything(self, n_sets: int) -> str | None:
        """None if PASSED is earned; otherwise why not."""
        if self.failure is not None:
            return self.failure.get("message", "a check failed")
        needed = set(range(min(self.num_input_sets, max(n_sets, 1))))
        if not needed <= self.checked_sets:
            return (
                "the worker reported PASSED, but input set(s) "
                f"{sorted(needed - self.checked_sets)} were never checked by the judge"
            )
        if self.timed_checks < self.num_trials:
            return (
                f"the worker reported PASSED, but only {self.timed_checks} of the "
                f"{self.num_trials} timed calls' outputs reached the judge"
            )
        return None


def validate_check(header: dict, blob: bytes, n_outputs: int, arena: Any = None) -> dict:
    """A worker's check request, or WireError. Outputs come in ``blob`` or, when the header
    names a slot, in that slot of the shared output buffer ``arena`` (the parent's
    :class:`fib_core.bench.evaluation.exchange.ArenaHandle`: id, slots, slot_bytes)."""
    k, label = header.get("set"), header.get("label")
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < MAX_SETS:
        raise WireError("malformed check request (bad input set index)")
    n_sets = header.get("sets")
    if not isinstance(n_sets, int) or isinstance(n_sets, bool) or not k < n_sets <= MAX_SETS:
        raise WireError("malformed check request (bad number of input sets)")
    if label not in ("set", "timed"):
        raise WireError("malformed check request (bad label)")
    if "slot" in header or "arena" in header:
        slot = header.get("slot")
        if (
            arena is None
            or blob
            or header.get("arena") != arena.arena_id
            or not isinstance(slot, int)
            or isinstance(slot, bool)
            or not 0 <= slot < arena.slots
        ):
            raise WireError("malformed check request (bad shared-buffer slot)")
        validate_values(header.get("outputs"), None, n_outputs, capacity=arena.slot_bytes)
    else:
        validate_values(header.get("outputs"), len(blob), n_outputs)
    if len(header["outputs"]) != n_outputs:
        raise WireError("malformed check request (wrong number of outputs)")
    return header


def validate_result(header: dict) -> dict:
    """A worker's final report with only the fields and types the parent uses, or WireError."""
    status = header.get("status")
    if status not in STATUSES:
        raise WireError(f"malformed result (status {str(status)[:40]!r})")
    log = header.get("log", "")
    extra = header.get("extra", {})
    perf = header.get("performance")
    corr = header.get("correctness")
    if not isinstance(log, str) or not isinstance(extra, dict):
        raise WireError("malformed result (log or extra of the wrong type)")
    if perf is not None and not isinstance(perf, dict):
        raise WireError("malformed result (performance is not an object)")
    if corr is not None and not isinstance(corr, dict):
        raise WireError("malformed result (correctness is not an object)")
    if len(json.dumps(extra)) > MAX_EXTRA_BYTES:  # a flood of extras: keep the essentials
        extra = {k: extra[k] for k in ESSENTIAL_EXTRAS if k in extra}
        extra["warnings"] = ["the worker's extras were too large and were dropped"]
    return {
        "status": status,
        "log": clip_text(log),
        "extra": extra,
        "performance": perf,
        "correctness": corr,
        "fatal": header.get("fatal") is True,
        "tainted": header.get("tainted") is True,
    }


def final_result(task_id: int, report: dict, ledger: TaskLedger, latency: dict | None) -> Any:
    """The EvalResult the parent records for a worker's validated report."""
    extra = report["extra"]
    status = report["status"]
    if status != EvaluationStatus.PASSED:
        corr = report["correctness"]
        if ledger.failure is not None and ledger.failure["status"] == status:
            corr = ledger.failure.get("correctness")
        return EvalResult(
            task_id, status, report["log"], _corr_dict(corr), None, extra, report["fatal"]
        )
    n_sets = extra.get("num_input_sets", 1)
    n_sets = n_sets if isinstance(n_sets, int) and not isinstance(n_sets, bool) else 1
    why = ledger.passed_everything(n_sets)
    if why is not None:
        failed = ledger.failure or {"status": EvaluationStatus.RUNTIME_ERROR}
        return EvalResult(
            task_id,
            failed["status"],
            clip_text(why),
            _corr_dict(failed.get("correctness")),
            None,
            extra,
            report["fatal"],
        )
    perf = report["performance"] or {}
    latency_ms = perf.get("latency_ms")
    if (
        not isinstance(latency_ms, (int, float))
        or isinstance(latency_ms, bool)
        or not math.isfinite(latency_ms)
        or latency_ms <= 0
    ):
        return EvalResult(
            task_id, EvaluationStatus.RUNTIME_ERROR, "the worker reported no valid latency", None, None, extra
        )
    performance = _passed_performance(perf, latency_ms, latency, extra)
    assert ledger.first is not None
    return EvalResult(
        task_id,
        EvaluationStatus.PASSED,
        clip_text(ledger.first.get("message", "")),
        _corr_dict(ledger.first.get("correctness")),
        performance,
        extra,
        report["fatal"],
    )


def _passed_performance(perf: dict, latency_ms: float, latency: dict | None, extra: dict) -> dict:
    """A passed task's performance: the worker's latency, the judge's reference latency (and
    its timing details) and the speedup of one over the other; the worker's other figures
    are kept as Performance's extras. The judge's reference timing is charged to ``extra``'s
    phases."""
    known = ("latency_ms", "reference_latency_ms", "speedup_factor")
    perf_extra = {k: v for k, v in perf.items() if k not in known}  # Performance's extras
    ref_ms = 0.0
    if latency is not None:
        ref_ms = latency["latency_ms"]
        perf_extra["reference_timing"] = latency["extra"]
        _charge_reference_phase(extra, latency.get("seconds", 0.0))
    else:  # not measured (a CPU smoke run): the report shows unknown, never a 0.00x speedup
        perf_extra["reference_timing"] = {"skipped": True}
    speedup = ref_ms / latency_ms if ref_ms > 0 else 0.0
    return {
        **perf_extra,
        "latency_ms": float(latency_ms),
        "reference_latency_ms": ref_ms,
        "speedup_factor": speedup,
    }


def _corr_dict(raw: Any) -> dict | None:
    corr = correctness_from(raw)
    return corr.to_dict() if corr is not None else None


def validate_latency(header: dict) -> dict:
    ms, extra = header.get("latency_ms"), header.get("extra")
    seconds = header.get("seconds", 0.0)
    if (
        not isinstance(ms, (int, float))
        or not math.isfinite(ms)
        or ms < 0
        or not isinstance(extra, dict)
        or not isinstance(seconds, (int, float))
        or not math.isfinite(seconds)
        or seconds < 0
    ):
        raise WireError("malformed reference latency from the judge")
    return {"latency_ms": float(ms), "extra": extra, "seconds": float(seconds)}


def _charge_reference_phase(extra: dict, seconds: float) -> None:
    """Move the judge's reference pass into the trace's phase breakdown.

    The pass runs while the worker waits on its first check (its "run" phase), so those seconds
    are the reference's, not the solution's: ``--profile-harness`` shows them as "reference".
    """
    phases = extra.get("phase_seconds")
    if not isinstance(phases, dict) or seconds <= 0:
        return
    run = phases.get("run")
    if isinstance(run, (int, float)) and not isinstance(run, bool):
        phases["run"] = round(max(0.0, run - seconds), 3)
    phases["reference"] = round(seconds, 3)
