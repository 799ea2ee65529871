"""The contest's verdict on one run: score, pass count, slowest workloads.

The contest scores a solution on a definition as the arithmetic mean, over the definition's
workloads, of reference latency / solution latency; a solution with any failed workload scores
0. ``mean_speedup_passed`` is the same mean over the passing workloads only: not the score, but
what a contestant wants to see while fixing the failures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fib_core.report.results import RunResults

SLOWEST_SHOWN = 3


@dataclass(frozen=True)
class Summary:
    """``slowest`` lists (uuid, latency_ms) of passing workloads, slowest first."""

    score: float
    passed: int
    total: int
    failed: int
    slowest: list[tuple[str, float]] = field(default_factory=list)
    mean_speedup_passed: float | None = None
    # False when the run cannot be scored at all: a CPU smoke run, or a passing workload whose
    # reference was not timed. Reports then show "-" and "no score", never a 0.00x.
    has_score: bool = True

    def __post_init__(self) -> None:
        if self.passed < 0 or self.failed < 0 or self.passed + self.failed != self.total:
            raise ValueError(
                f"Summary: passed ({self.passed}) + failed ({self.failed}) must equal "
                f"total ({self.total})"
            )
        if self.score < 0:
            raise ValueError(f"Summary.score: found {self.score}, expected >= 0")

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.failed == 0


def summarize(results: RunResults, *, n_slowest: int = SLOWEST_SHOWN) -> Summary:
    """Apply the contest rule to ``results`` (an empty run scores 0)."""
    rows = results.rows
    passing = [r for r in rows if r.passed]
    speedups = [r.speedup for r in passing if r.speedup is not None]
    mean_passed = sum(speedups) / len(speedups) if speedups else None
    failed = len(rows) - len(passing)
    # A PASSED row without a speedup cannot be scored: treat the run as unscorable, not as fast.
    scorable = rows and failed == 0 and len(speedups) == len(passing)
    score = mean_passed if scorable and mean_passed is not None else 0.0
    has_score = not results.is_cpu_smoke and len(speedups) == len(passing)
    timed = sorted(
        ((r.uuid, r.latency_ms) for r in passing if r.latency_ms is not None),
        key=lambda item: item[1],
        reverse=True,
    )
    return Summary(
        score=score,
        passed=len(passing),
        total=len(rows),
        failed=failed,
        slowest=timed[:n_slowest],
        mean_speedup_passed=mean_passed,
        has_score=has_score,
    )
