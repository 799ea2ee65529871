"""Per-workload comparison of a run with a previous one (``--compare``).

The rule for "outside the noise": a latency change counts only when it is larger than both
runs' own spread and than a fixed floor. For each run the spread is its p10-p90 band relative to
its latency, (p90 - p10) / latency; the noise band is the larger of the two runs' bands and of
``floor_pct`` (3 % by default, because medians of GPU kernels drift by a percent or two between
runs even when each run looks tight). A run without spread figures counts for the floor only; a workload timed once in either run
(a CPU smoke run) gets no faster/slower verdict at all, only its change.

Example (what ``scripts/compare.py`` prints from two ``--json`` files)::

    from fib_core.report.results import RunResults
    deltas = compare(RunResults.from_json("new.json"), RunResults.from_json("base.json"))
    print(sum(d.verdict == FASTER for d in deltas), "faster")
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from fib_core.report.results import RunResults
from fib_core.report.workload_result import WorkloadResult

DEFAULT_FLOOR_PCT = 3.0

FASTER = "faster"
SLOWER = "slower"
WITHIN_NOISE = "within noise"
NEW = "new"
MISSING = "missing"
NOW_FAILING = "now failing"
NOW_PASSING = "now passing"
STILL_FAILING = "still failing"
# Either run timed the workload once: there is no spread, so no faster/slower verdict.
ONE_SAMPLE = "one sample, no verdict"
VERDICTS = (
    FASTER,
    SLOWER,
    WITHIN_NOISE,
    NEW,
    MISSING,
    NOW_FAILING,
    NOW_PASSING,
    STILL_FAILING,
    ONE_SAMPLE,
)
# Fewer timed calls than this in either run and the change is shown but not judged.
MIN_SAMPLES = 2


@dataclass(frozen=True)
class Delta:
    """How one workload moved. ``change_pct`` < 0 means faster now; None when not both timed."""

    uuid: str
    verdict: str
    axes: dict[str, int] = field(default_factory=dict)
    current_ms: float | None = None
    previous_ms: float | None = None
    change_pct: float | None = None
    noise_pct: float | None = None
    outside_noise: bool = False

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"Delta.verdict: found {self.verdict!r}, expected one of {VERDICTS}")
        if self.outside_noise and self.verdict not in (FASTER, SLOWER):
            raise ValueError("Delta: only a faster or slower verdict lies outside the noise")


def compare(
    current: RunResults, previous: RunResults, *, floor_pct: float = DEFAULT_FLOOR_PCT
) -> list[Delta]:
    """One :class:`Delta` per workload of either run: current's order, then the missing ones."""
    if floor_pct < 0:
        raise ValueError(f"compare: floor_pct must be >= 0, found {floor_pct}")
    deltas = [_delta(row, previous.row(row.uuid), floor_pct) for row in current.rows]
    seen = {row.uuid for row in current.rows}
    deltas += [
        Delta(uuid=row.uuid, verdict=MISSING, axes=dict(row.axes), previous_ms=row.latency_ms)
        for row in previous.rows
        if row.uuid not in seen
    ]
    return deltas


def comparability_warning(current: RunResults, previous: RunResults) -> str | None:
    """A one-line caution when the two runs were not measured on the same kind of machine."""
    if current.definition != previous.definition:
        return (
            f"the previous results are for {previous.definition}, "
            f"not {current.definition}: workloads will not match"
        )
    if current.device != previous.device:
        return f"comparing a {current.device} run with a {previous.device} run: latencies differ in kind"
    if current.gpu_name and previous.gpu_name and current.gpu_name != previous.gpu_name:
        return f"comparing runs on different GPUs ({current.gpu_name} vs {previous.gpu_name})"
    return None


def _delta(cur: WorkloadResult, prev: WorkloadResult | None, floor_pct: float) -> Delta:
    if prev is None:
        return Delta(uuid=cur.uuid, verdict=NEW, axes=dict(cur.axes), current_ms=cur.latency_ms)
    # a workload both runs hold: every verdict below carries both latencies
    both = functools.partial(
        Delta,
        uuid=cur.uuid,
        axes=dict(cur.axes),
        current_ms=cur.latency_ms,
        previous_ms=prev.latency_ms,
    )
    if not cur.passed or not prev.passed:
        if not cur.passed and not prev.passed:
            return both(verdict=STILL_FAILING)
        return both(verdict=NOW_FAILING if not cur.passed else NOW_PASSING)
    assert cur.latency_ms is not None and prev.latency_ms is not None  # PASSED rows are timed
    change = (cur.latency_ms - prev.latency_ms) / prev.latency_ms * 100.0
    if any(r.samples is not None and r.samples < MIN_SAMPLES for r in (cur, prev)):
        return both(verdict=ONE_SAMPLE, change_pct=change)
    noise = noise_band_pct(cur, prev, floor_pct)
    outside = abs(change) > noise
    verdict = WITHIN_NOISE if not outside else (FASTER if change < 0 else SLOWER)
    return both(verdict=verdict, change_pct=change, noise_pct=noise, outside_noise=outside)


def noise_band_pct(a: WorkloadResult, b: WorkloadResult, floor_pct: float) -> float:
    """max(floor, each run's (p90 - p10) / latency), in percent."""
    bands = [floor_pct]
    for row in (a, b):
        width = row.spread.relative_width(row.latency_ms) if row.spread else None
        if width is not None:
            bands.append(width * 100.0)
    return max(bands)
