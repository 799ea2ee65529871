"""The few lines a results page or terminal summary opens with: the score that counts first.

The contest score is measured against the FlashInfer baseline; where the run has it, it is the
headline, with the speedup over the Python reference beside it. Where the baseline was not
measured, the headline is the speedup over the reference, called that (never "contest
score"). Either way a line says how much the reference itself varies between workloads of
one shape: a mean of reference / kernel ratios moves with that noise, not with the kernel.

Example::

    from fib_core.report.headline import headline
    h = headline(results)
    print(h.title)
    for line in h.details:
        print(line)
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from fib_core.report.baseline import (
    BASELINE_LABEL,
    baseline_name,
    baseline_speedups,
    contest_details,
    contest_score,
    no_score_reason,
)
from fib_core.report.formats import fmt_ms
from fib_core.report.results import RunResults
from fib_core.report.shapes import by_shape, worst_reference_spread
from fib_core.report.summary import summarize

REFERENCE_SCORE_NAME = "speedup over the reference"


@dataclass(frozen=True)
class Headline:
    """``title``: the one line that counts; ``details``: what qualifies it, one fact a line.

    ``score`` is the number the title shows (None: no score); ``kind`` says which score it is:
    "contest" (over the baseline), "reference" (over the Python reference) or "none".
    """

    title: str
    kind: str
    score: float | None
    details: list[str] = field(default_factory=list)


def headline(results: RunResults) -> Headline:
    """The headline of ``results``: its title and the lines that qualify it."""
    summary = summarize(results)
    n, failed = summary.total, summary.failed
    passing = [r for r in results.rows if r.passed]
    details: list[str] = []
    contest = None if results.is_cpu_smoke else contest_score(results)
    ref_speedups = [r.speedup for r in passing if r.speedup is not None]
    ref_text = _mean_median(ref_speedups)
    if results.is_cpu_smoke:
        title, kind, score = "No score: CPU smoke run, correctness only", "none", None
    elif contest is not None:
        kind, score = "contest", contest
        if failed:
            title = f"Contest score 0 ({failed} of {n} workloads failed)"
            base = list(baseline_speedups(results).values())
            if base:
                details.append(f"speedup over the {BASELINE_LABEL} of the passing ones: "
                               + _mean_median(base))
        else:
            compared = contest_details(results).get("compared") or n
            cover = _plural(n, "workload") if compared == n else f"{compared} of {n} workloads"
            title = f"Contest score {contest:.2f}x (mean speedup over the {BASELINE_LABEL}, " \
                    f"{cover})"
        name = baseline_name(results)
        if name:
            details.append(f"baseline: {name}")
        if ref_text:
            details.append(f"{REFERENCE_SCORE_NAME}: {ref_text}")
    elif n == 0:
        title, kind, score = "Score 0: no workload was measured", "none", 0.0
    elif not summary.has_score:
        title, kind, score = "No score: the reference was not timed", "none", None
    else:
        kind = "reference"
        score = summary.score
        if failed:
            title = f"Score 0 ({failed} of {n} workloads failed)"
        else:
            title = f"Speedup over the reference {summary.score:.2f}x (mean over " \
                    f"{_plural(n, 'workload')})"
        if failed and ref_text:
            details.append(f"{REFERENCE_SCORE_NAME} of the passing ones: {ref_text}")
        elif ref_text:
            details.append(f"{REFERENCE_SCORE_NAME}: {ref_text}")
        why = no_score_reason(results) or "this run did not measure it"
        details.append(
            f"not the contest score: the contest divides the {BASELINE_LABEL}'s latency ({why})"
        )
    noisy = worst_reference_spread(by_shape(results))
    if noisy is not None and noisy.reference is not None and noisy.reference.ratio >= 1.1:
        ref = noisy.reference
        details.append(
            f"the reference itself varies up to {ref.ratio:.2f}x between workloads of one shape "
            f"({noisy.label}: {fmt_ms(ref.low)} to {fmt_ms(ref.high)}); speedups over it carry "
            "that noise"
        )
    return Headline(title, kind, score, details)


def score_text(results: RunResults) -> str:
    """The run's score in a few characters, saying which one: ``1.35x (contest)``, ``42.10x
    (vs reference)``, or ``-`` when the run has none (a CPU smoke run)."""
    h = headline(results)
    if h.score is None:
        return "-"
    return f"{h.score:.2f}x ({'contest' if h.kind == 'contest' else 'vs reference'})"


def _mean_median(values: list[float]) -> str:
    if not values:
        return ""
    mean, median = statistics.fmean(values), statistics.median(values)
    return f"mean {mean:.2f}x, median {median:.2f}x, range {min(values):.2f}x to {max(values):.2f}x"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
