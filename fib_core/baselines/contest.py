"""A run's contest score: its speedup over the FlashInfer baseline, as the organizers score it.

Per workload, the baseline's latency over the solution's; the mean over the workloads where
the baseline passed; 0 when any workload of the solution failed (the formula is
:func:`fib_core.data.scoring.speedup_metrics`). The kit's other number, the speedup over the
definition's Python reference, stays in the table; this one is what the contest ranks.

Example::

    score = contest_of_run(definition, traces, shards)   # the shards' baseline figures
    print(score.line())   # contest score 1.234x vs FlashInfer flashinfer_wrapper_9b7f1e (...)
    score.model_dump()    # what --json writes under "contest" ("contest_score": its score)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from fib_core.baselines.measure import BaselineTimes
from fib_core.data.scoring import SolutionRecord, SpeedupMetrics, speedup_metrics


class ContestScore(BaseModel):
    """The contest score of one run on one definition, or why there is none.

    ``score`` is None when no baseline figure exists here (``reason`` says why and what to do);
    ``compared`` counts the workloads in the mean, ``selected`` those the run ran.
    """

    definition: str
    baseline: str | None = None
    score: float | None = None
    metrics: SpeedupMetrics | None = None
    compared: int = 0
    selected: int = 0
    baseline_failed: int = 0
    reason: str | None = None
    gpu: str | None = None
    versions: dict[str, str] = {}
    baseline_latency_ms: dict[str, float] = {}
    """The baseline's latency per workload uuid of this run (where it passed)."""
    baseline_failures: dict[str, str] = {}
    """Why the baseline failed, per workload uuid of this run ("STATUS: reason")."""

    def failure_example(self) -> str:
        """' (e.g. UUID8: STATUS: reason)' for the baseline's failure of the lowest uuid, on one
        line and at most 100 characters of reason, so a score line says why; '' if none."""
        if not self.baseline_failures:
            return ""
        uuid, why = min(self.baseline_failures.items())
        why = " ".join(why.split()).rstrip(": ")
        why = why if len(why) <= 100 else why[:97] + "..."
        return f" (e.g. {uuid[:8]}: {why})"

    def line(self) -> str:
        """One terminal line: the score and what it covers, or why there is none."""
        if self.score is None:
            named = f"FlashInfer baseline {self.baseline}: " if self.baseline else ""
            return f"contest score: none ({named}{self.reason}{self.failure_example()})"
        libs = ", ".join(f"{name} {version}" for name, version in self.versions.items())
        where = f"; {self.gpu}" + (f", {libs}" if libs else "") if self.gpu else ""
        if self.metrics is not None and self.metrics.success_rate == 0.0:
            what = "a workload failed: any failure scores 0"
        else:
            wins = round((self.metrics.win_rate if self.metrics else 0.0) * self.compared)
            what = f"faster on {wins}"
        cover = f"{self.compared} of {self.selected} workloads"
        if self.baseline_failed:
            cover += f", {self.baseline_failed} left out: the baseline failed them"
            cover += self.failure_example()
        return (f"contest score {self.score:.3f}x vs FlashInfer {self.baseline} "
                f"({cover}; {what}{where})")


def contest_score(
    definition: str, traces: Iterable[Any], shards: Iterable[BaselineTimes | dict | None]
) -> ContestScore:
    """Score a run's ``traces`` against the baseline latencies its shards brought back."""
    parts = [BaselineTimes.from_dict(s) if isinstance(s, dict) else s for s in shards]
    parts = [p for p in parts if p is not None]
    traces = list(traces)
    result = ContestScore(definition=definition, selected=len(traces))
    if not parts:
        result.reason = "no baseline figures came back from this run"
        return result
    first = parts[0]
    result.baseline, result.gpu, result.versions = first.baseline, first.gpu, first.versions
    reasons = [p.reason for p in parts if p.reason]
    if reasons:
        result.reason = reasons[0]
        return result
    latencies: dict[str, float] = {}
    failed: dict[str, str] = {}
    for part in parts:
        latencies.update(part.latencies)
        failed.update(part.failed)
    record = SolutionRecord()
    for trace in traces:
        ev = trace.evaluation
        if ev is None:
            continue
        perf = ev.performance
        ok = ev.passed and perf is not None and perf.is_valid
        record.add(trace.workload.uuid, perf.latency_ms if ok else None)
    result.baseline_failures = {u: why for u, why in failed.items() if u in record.touched}
    result.baseline_failed = len(result.baseline_failures)
    result.baseline_latency_ms = {u: ms for u, ms in latencies.items() if u in record.touched}
    metrics = speedup_metrics(record, latencies)
    if metrics is None:
        result.reason = "the baseline passed none of this run's workloads"
        return result
    result.metrics, result.score, result.compared = metrics, metrics.avg_speedup, metrics.workloads
    return result


def contest_of_run(definition: str, traces: list[Any], shards: Iterable[Any]) -> ContestScore:
    """The contest score of a run from its traces and its shards' baseline figures
    (``ShardResult.baseline``)."""
    return contest_score(definition, traces, [s.baseline for s in shards if s.baseline])


def print_contest_score(score: ContestScore, shards: Iterable[Any], console: Any) -> None:
    """Print the score's line, after what the baseline's measurement has to say.

    Printed without rich markup: a reason may hold an install hint such as
    ``pip install -e ".[baseline]"``, whose brackets rich would read as a style tag and drop."""
    parts = [s.baseline for s in shards if s.baseline]
    measured = sum(int(p.get("measured") or 0) for p in parts)
    kept = sum(int(p.get("kept") or 0) for p in parts)
    if measured:
        where = "; kept for the next runs on this GPU" if kept else ""
        console.print(f"FlashInfer baseline timed on {measured} workload(s) now{where}",
                      highlight=False)
    for note in dict.fromkeys(n for p in parts for n in p.get("notes") or []):
        console.print(f"note: {note}", highlight=False, markup=False)
    console.print(score.line(), highlight=False, soft_wrap=True, markup=False)
