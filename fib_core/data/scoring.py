"""The contest's score: speedups over one baseline solution per definition, and track scores.

The one home of the formula, used by ``TraceSet.get_solution_score`` / ``get_author_score`` /
``rank_authors`` / ``summary``, by the score a run prints against the FlashInfer baselines
(:mod:`fib_core.baselines`) and by the track score (:mod:`fib_core.project.track_score`).

The rules (the organizers' published evaluation):

* per (solution, workload uuid) the lowest latency among its passing traces counts;
* a workload counts only where the baseline passed it (and the solution has a trace for it);
* speedup = baseline latency / solution latency; a definition's score is the arithmetic mean
  of the speedups, or 0 when any of the solution's traces failed;
* an author's score is the mean, over the definitions in scope, of their best solution there;
* a track's score is the sum of its definition scores over the number of definitions the
  track expects (MoE 1, DSA 2, GDN 2): a missing or failing definition counts 0, so one
  definition of a two-definition track is halved.

Example::

    from fib_core.data.scoring import SolutionRecord, speedup_metrics
    mine = SolutionRecord(best_latency={"w1": 0.5, "w2": 2.0}, touched={"w1", "w2"})
    m = speedup_metrics(mine, baseline={"w1": 1.0, "w2": 1.0})
    m.avg_speedup, m.win_rate         # (1.25, 0.5)
    m.track_score(expected=2)         # 0.625: the other definition of the track is missing
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from fib_core.errors import SchemaError

from .errors import BaselineError
from .solution import Solution
from .trace import Trace


class SpeedupMetrics(BaseModel):
    """A score against a baseline: of one solution on one definition, or of an author.

    >>> SpeedupMetrics(avg_speedup=2.0, definitions=1, workloads=3, success_rate=1.0,
    ...                win_rate=1.0).track_score(expected=2)
    1.0
    """

    model_config = ConfigDict(frozen=True)

    avg_speedup: float
    """Mean of baseline latency / scored latency over the workloads compared (0 on a failure)."""
    definitions: int
    """How many definitions contributed (1 for a solution's score)."""
    workloads: int
    """How many workloads were compared (summed over definitions for an author)."""
    success_rate: float
    """1.0 when the solution passed every trace, 0.0 when any failed (averaged for an author)."""
    win_rate: float
    """Fraction of the workloads where the scored solution beat the baseline."""
    best_solutions: dict[str, str] | None = None
    """An author's score only: definition name -> the author's best solution there."""

    def track_score(self, expected: int) -> float:
        """This score as a track's: the definitions present, over ``expected`` definitions
        (the organizers' ``avg_speedup * definitions / expected``)."""
        return track_mean([self.avg_speedup] * self.definitions, expected)


class TraceSetSummary(BaseModel):
    """Trace counts of a dataset and its author rankings (``TraceSet.summary``)."""

    total: int
    """Every evaluated trace of the dataset."""
    passed: int
    """Traces whose evaluation PASSED."""
    failed: int
    """The others."""
    rankings: list[tuple[str, SpeedupMetrics]]
    """(author, score), best ``avg_speedup`` first, then by author name."""


@dataclass
class SolutionRecord:
    """What scoring needs from one solution's traces.

    ``best_latency``: the lowest passing latency per workload uuid; ``touched``: every workload
    uuid with an evaluated trace (passed or not); ``failed``: any trace did not pass.
    """

    best_latency: dict[str, float] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)
    failed: bool = False

    def add(self, uuid: str, latency_ms: float | None) -> None:
        """One evaluated trace: ``latency_ms`` of a passing one, None for a failure."""
        self.touched.add(uuid)
        if latency_ms is None:
            self.failed = True
            return
        previous = self.best_latency.get(uuid)
        if previous is None or latency_ms < previous:
            self.best_latency[uuid] = latency_ms


def collect_records(traces: Iterable[Trace]) -> dict[str, SolutionRecord]:
    """One pass over a definition's traces, grouped by solution name.

    A PASSED trace without a finite latency > 0 is a broken dataset: SchemaError (a ValueError).
    """
    records: dict[str, SolutionRecord] = {}
    for trace in traces:
        if trace.solution is None or trace.evaluation is None:
            continue
        rec = records.setdefault(trace.solution, SolutionRecord())
        evaluation = trace.evaluation
        if not evaluation.passed:
            rec.add(trace.workload.uuid, None)
            continue
        perf = evaluation.performance
        if perf is None or not perf.is_valid:
            raise SchemaError(
                "a finite latency_ms > 0 in a PASSED trace",
                field="evaluation.performance.latency_ms",
                found=perf.latency_ms if perf is not None else None,
                hint=f"solution {trace.solution!r}, workload {trace.workload.uuid!r}",
            )
        rec.add(trace.workload.uuid, perf.latency_ms)
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


def speedup_metrics(
    solution: SolutionRecord, baseline: Mapping[str, float]
) -> SpeedupMetrics | None:
    """The contest score of one solution on one definition against ``baseline`` (workload uuid
    -> the baseline's best passing latency).

    None when no workload compares (none the solution ran where the baseline passed); 0 with
    success_rate 0 when any of the solution's traces failed; else the mean speedup.
    """
    common = sorted(uuid for uuid in solution.touched if uuid in baseline)
    if not common:
        return None
    count = len(common)
    if solution.failed:
        return SpeedupMetrics(
            avg_speedup=0.0, definitions=1, workloads=count, success_rate=0.0, win_rate=0.0
        )
    ratios = [baseline[uuid] / solution.best_latency[uuid] for uuid in common]
    return SpeedupMetrics(
        avg_speedup=sum(ratios) / count,
        definitions=1,
        workloads=count,
        success_rate=1.0,
        win_rate=sum(1 for r in ratios if r > 1.0) / count,
    )


def score_solution(
    solution: Solution, baseline: Solution, records: Mapping[str, SolutionRecord]
) -> SpeedupMetrics | None:
    """:func:`speedup_metrics` of ``solution`` from a definition's records (None for the
    baseline itself, or a solution without traces)."""
    if solution.name == baseline.name:
        return None
    rec = records.get(solution.name)
    if rec is None:
        return None
    base = records.get(baseline.name)
    return speedup_metrics(rec, base.best_latency if base is not None else {})


def best_of_author(
    author: str,
    solutions: list[Solution],
    baseline: Solution,
    records: Mapping[str, SolutionRecord],
) -> tuple[str, SpeedupMetrics] | None:
    """The author's best-scoring solution of one definition and its score (first on a tie)."""
    best: tuple[str, SpeedupMetrics] | None = None
    for sol in solutions:
        if sol.author != author:
            continue
        metrics = score_solution(sol, baseline, records)
        if metrics is not None and (best is None or metrics.avg_speedup > best[1].avg_speedup):
            best = (sol.name, metrics)
    return best


def combine_definitions(best: Mapping[str, tuple[str, SpeedupMetrics]]) -> SpeedupMetrics | None:
    """An author's score from their best solution per definition: plain means over definitions
    (not weighted by workload count), workloads summed; None when empty."""
    if not best:
        return None
    count = len(best)
    parts = [metrics for _, metrics in best.values()]
    return SpeedupMetrics(
        avg_speedup=sum(m.avg_speedup for m in parts) / count,
        definitions=count,
        workloads=sum(m.workloads for m in parts),
        success_rate=sum(m.success_rate for m in parts) / count,
        win_rate=sum(m.win_rate for m in parts) / count,
        best_solutions={name: sol for name, (sol, _) in best.items()},
    )


def track_mean(scores: Iterable[float], expected: int) -> float:
    """A track's score: the definition scores present, summed, over the ``expected`` count.

    >>> track_mean([3.0], expected=2)   # the other definition is missing: halved
    1.5
    """
    if expected < 1:
        raise ValueError(f"expected definitions: found {expected}, expected 1 or more")
    return sum(scores) / expected
