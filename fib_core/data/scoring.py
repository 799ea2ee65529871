"""Contest scoring over traces: speedups against one baseline solution per definition.

Rules (the contest's): per (solution, workload uuid) the lowest latency among passing traces
counts; a workload counts only where the baseline passed; speedup = baseline latency / solution
latency; a solution's score is the mean speedup, or 0 if any of its traces failed; an author's
score is the mean over definitions of their best solution there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from fib_core.errors import SchemaError

from .errors import BaselineError
from .solution import Solution
from .trace import Trace


@dataclass
class SolutionRecord:
    """What scoring needs from one solution's traces: best latency per workload, any failure."""

    best_latency: dict[str, float] = field(default_factory=dict)
    failed: bool = False


def collect_records(traces: Iterable[Trace]) -> dict[str, SolutionRecord]:
    """One pass over a definition's traces, grouped by solution name."""
    records: dict[str, SolutionRecord] = {}
    for trace in traces:
        if trace.solution is None or trace.evaluation is None:
            continue
        rec = records.get(trace.solution)
        if rec is None:
            rec = records[trace.solution] = SolutionRecord()
        evaluation = trace.evaluation
        if not evaluation.passed:
            rec.failed = True
            continue
        perf = evaluation.performance
        if perf is None or not perf.is_valid:
            raise SchemaError(
                "a finite latency_ms > 0 in a PASSED trace",
                field="evaluation.performance.latency_ms",
                found=perf.latency_ms if perf is not None else None,
                hint=f"solution {trace.solution!r}, workload {trace.workload.uuid!r}",
            )
        latency = perf.latency_ms
        uuid = trace.workload.uuid
        previous = rec.best_latency.get(uuid)
        if previous is None or latency < previous:
            rec.best_latency[uuid] = latency
    return records


def find_baseline(definition: str, solutions: list[Solution], baseline_author: str) -> Solution:
    """The single solution of ``baseline_author`` for ``definition`` (else BaselineError)."""
    found = [sol for sol in solutions if sol.author == baseline_author]
    if len(found) != 1:
        names = ", ".join(sol.name for sol in found) or "none"
        raise BaselineError(
            f"definition {definition!r}: expected exactly one solution by baseline author "
            f"{baseline_author!r}, found {len(found)} ({names}); add one or pass baseline_author"
        )
    return found[0]


def score_solution(
    solution: Solution, baseline: Solution, records: dict[str, SolutionRecord]
) -> float | None:
    """Mean speedup of ``solution`` over ``baseline``; 0 on any failure; None if incomparable."""
    if solution.name == baseline.name:
        return None
    rec = records.get(solution.name)
    if rec is None:
        return None
    if rec.failed:
        return 0.0
    base = records.get(baseline.name)
    if base is None:
        return None
    speedups = [
        base.best_latency[uuid] / latency
        for uuid, latency in rec.best_latency.items()
        if uuid in base.best_latency
    ]
    if not speedups:
        return None
    return sum(speedups) / len(speedups)


def best_author_score(
    author: str, solutions: list[Solution], baseline: Solution,
    records: dict[str, SolutionRecord],
) -> float | None:
    """The best score among ``author``'s solutions of one definition (None if none scores)."""
    scores = [
        score
        for sol in solutions
        if sol.author == author
        and (score := score_solution(sol, baseline, records)) is not None
    ]
    return max(scores) if scores else None


def mean_or_none(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
