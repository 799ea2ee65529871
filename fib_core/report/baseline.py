"""The FlashInfer baseline's figures and the contest score, wherever a run carries them.

The contest scores a kernel against the FlashInfer baseline (mean over workloads of baseline
latency / kernel latency, 0 on any failure); the speedup over the definition's Python reference
is the older figure, still useful but dominated by the reference's own noise. A run carries
baseline figures only where the baseline was measured (it needs ``flashinfer-python`` and a
GPU it supports): ``RunResults.contest_score`` and ``RunResults.contest`` (the score's details,
its ``baseline_latency_ms`` per workload uuid, or the ``reason`` there is none). Every reader
here answers None or nothing when they are absent, and the reports then fall back to the
reference speedup, labelled as such. Results are read by attribute or key, so an older results
file (no baseline) and a newer one both work.

Example::

    from fib_core.report.baseline import baseline_latencies, contest_score
    score = contest_score(results)          # None: no baseline measured
    ms = baseline_latencies(results).get(results.rows[0].uuid)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

BASELINE_LABEL = "FlashInfer baseline"


def contest_details(results: Any) -> dict[str, Any]:
    """The run's ``contest`` details (empty when it has none)."""
    details = getattr(results, "contest", None)
    return details if isinstance(details, Mapping) else {}


def baseline_latencies(results: Any) -> dict[str, float]:
    """uuid -> the baseline's latency (ms) on that workload, where it was measured and passed."""
    found: dict[str, float] = {}
    table = contest_details(results).get("baseline_latency_ms")
    if isinstance(table, Mapping):
        found.update({str(u): v for u, ms in table.items() if (v := _number(ms)) is not None})
    return found


def baseline_speedups(results: Any) -> dict[str, float]:
    """uuid -> baseline latency / kernel latency for each passing workload with a baseline:
    the contest's per-workload figure."""
    base = baseline_latencies(results)
    return {
        r.uuid: base[r.uuid] / r.latency_ms
        for r in getattr(results, "rows", None) or []
        if r.passed and r.latency_ms and r.uuid in base
    }


def contest_score(results: Any) -> float | None:
    """The run's contest score: the one the results carry, else the contest rule applied to
    the rows when every passing workload has a baseline latency (0 when any workload failed);
    None when the baseline was not measured."""
    details = contest_details(results)
    for value in (getattr(results, "contest_score", None), details.get("score")):
        if (number := _number(value)) is not None:
            return number
    if "score" in details:
        return None  # the run scored itself and found no score: ``no_score_reason`` says why
    rows = list(getattr(results, "rows", None) or [])
    passing = [r for r in rows if r.passed]
    speedups = baseline_speedups(results)
    if not passing or any(r.uuid not in speedups for r in passing):
        return None
    if len(passing) < len(rows):
        return 0.0
    return sum(speedups.values()) / len(speedups)


def no_score_reason(results: Any) -> str | None:
    """Why the run has no contest score, as the run recorded it (None when it did not say)."""
    reason = contest_details(results).get("reason")
    return str(reason) if reason else None


def baseline_name(results: Any) -> str | None:
    """The baseline solution the score was measured against (``flashinfer_wrapper_9b7f1e``)."""
    name = contest_details(results).get("baseline")
    return str(name) if name else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None
