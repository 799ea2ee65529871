"""One workload's result, the row every results table shows, and the figures it is made of.

A row is shared by everything in the report layer: the run that holds rows
(:mod:`fib_core.report.results`), the traces they are read from (:mod:`fib_core.report.rows`)
and the roofline figures that fill them in (:mod:`fib_core.report.roofline_view`). It lives
here, below all three, so that each of them imports it and none imports another to reach it.
Plain dataclasses: a row pickles across processes (Modal shards) and has its own small JSON
form (``to_dict`` / ``from_dict``), non-finite errors included.

Example::

    from fib_core.report.workload_result import WorkloadResult
    row = WorkloadResult("a1b2c3d4", {"batch_size": 8}, "PASSED", latency_ms=0.012)
    assert row.passed and row.axes_text() == "batch_size=8"
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fib_core.data.json_io import write_float
from fib_core.data.trace import EvaluationStatus

ACHIEVED_UNITS = ("GB/s", "TFLOP/s")
PASSED = EvaluationStatus.PASSED.value
STATUSES = tuple(status.value for status in EvaluationStatus)
LOG_TAIL_LINES = 10


@dataclass(frozen=True)
class Achieved:
    """Throughput the solution reached: GB/s for memory-bound workloads, TFLOP/s otherwise."""

    value: float
    unit: str

    def __post_init__(self) -> None:
        if self.unit not in ACHIEVED_UNITS:
            raise ValueError(
                f"Achieved.unit: found {self.unit!r}, expected one of {ACHIEVED_UNITS}"
            )
        _check_number("Achieved.value", self.value, allow_none=False)

    def __str__(self) -> str:
        return (
            f"{self.value:.1f} {self.unit}" if self.value >= 10 else f"{self.value:.3g} {self.unit}"
        )


@dataclass(frozen=True)
class Spread:
    """Run-to-run spread of the timed calls (milliseconds); any figure may be unknown."""

    p10_ms: float | None = None
    p90_ms: float | None = None
    std_ms: float | None = None
    min_ms: float | None = None

    def __post_init__(self) -> None:
        for name in ("p10_ms", "p90_ms", "std_ms", "min_ms"):
            _check_number(f"Spread.{name}", getattr(self, name))

    def relative_width(self, center_ms: float | None) -> float | None:
        """(p90 - p10) / center: the noise band of this measurement, as a fraction."""
        if self.p10_ms is None or self.p90_ms is None or not center_ms:
            return None
        return max(0.0, self.p90_ms - self.p10_ms) / center_ms


@dataclass
class WorkloadResult:
    """One row of the results table: a workload's verdict and figures.

    ``speedup`` is reference latency / solution latency (higher is better). ``roofline_fraction``
    is the roofline floor divided by the measured latency (1.0 = at the hardware's limit).
    ``reason`` is one line saying why a workload failed (empty when it passed);
    ``log_tail`` holds the last lines of the worker's log for the failure report.
    ``warnings`` are the engine's cautions about this measurement (timing method limits,
    mutated inputs...), shown once each under the table.
    """

    uuid: str
    axes: dict[str, int]
    status: str
    latency_ms: float | None = None
    reference_latency_ms: float | None = None
    speedup: float | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    achieved: Achieved | None = None
    roofline_fraction: float | None = None
    floor_ms: float | None = None
    reason: str = ""
    log_tail: list[str] = field(default_factory=list)
    spread: Spread | None = None
    timing_method: str | None = None
    warnings: list[str] = field(default_factory=list)
    # What decided a PASSED verdict when the errors look alarming (see report.verdict_notes).
    decided_by: str = ""
    # Timed calls behind ``latency_ms`` (None: unknown); one sample carries no spread.
    samples: int | None = None
    # The datasheet peak the roofline floor assumes ("3350 GB/s (H100 SXM)"), the GPU clocks
    # the worker read before timing ("SM 1980/1980 MHz, mem 2619 MHz") and what was done to
    # the L2 cache between timed calls: the conditions a latency is only valid under.
    floor_peak: str | None = None
    clocks: str | None = None
    l2_policy: str | None = None
    # Of ``latency_ms``, the time the GPU ran the solution's own kernels (the rest of the span
    # is the GPU waiting for the host between them); None where the timer cannot tell.
    busy_ms: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.uuid, str) or not self.uuid:
            raise ValueError(
                f"WorkloadResult.uuid: found {self.uuid!r}, expected a non-empty string"
            )
        self.status = str(getattr(self.status, "value", self.status))
        if self.status not in STATUSES:
            raise ValueError(
                f"WorkloadResult.status: found {self.status!r}, expected one of {', '.join(STATUSES)}"
            )
        if not isinstance(self.axes, dict):
            raise ValueError(f"WorkloadResult.axes: found {self.axes!r}, expected a dict")
        for name in _TIMING_FIELDS:
            _check_number(f"WorkloadResult.{name}", getattr(self, name))
        for name in _ERROR_FIELDS:  # an output holding NaN or inf has such errors: keep them
            _check_number(f"WorkloadResult.{name}", getattr(self, name), allow_nan=True)
        if "\n" in self.reason:
            raise ValueError("WorkloadResult.reason: must be one line")
        if self.passed and self.latency_ms is None:
            raise ValueError(f"WorkloadResult {self.uuid}: a PASSED workload needs latency_ms")

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    @property
    def short_uuid(self) -> str:
        return self.uuid[:8]

    def axes_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.axes.items())

    def to_dict(self) -> dict[str, Any]:
        """JSON-able; non-finite errors become the format's strings "Infinity", "-Infinity",
        "NaN" (strict JSON)."""
        return {
            "uuid": self.uuid,
            "axes": dict(self.axes),
            "status": self.status,
            "latency_ms": self.latency_ms,
            "reference_latency_ms": self.reference_latency_ms,
            "speedup": self.speedup,
            "max_abs_error": write_float(self.max_abs_error),
            "max_rel_error": write_float(self.max_rel_error),
            "achieved": (
                {"value": self.achieved.value, "unit": self.achieved.unit}
                if self.achieved
                else None
            ),
            "roofline_fraction": self.roofline_fraction,
            "floor_ms": self.floor_ms,
            "reason": self.reason,
            "log_tail": list(self.log_tail),
            "spread": (
                {
                    "p10_ms": self.spread.p10_ms,
                    "p90_ms": self.spread.p90_ms,
                    "std_ms": self.spread.std_ms,
                    "min_ms": self.spread.min_ms,
                }
                if self.spread
                else None
            ),
            "timing_method": self.timing_method,
            "warnings": list(self.warnings),
            "decided_by": self.decided_by,
            "samples": self.samples,
            "floor_peak": self.floor_peak,
            "clocks": self.clocks,
            "l2_policy": self.l2_policy,
            "busy_ms": self.busy_ms,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorkloadResult:
        achieved = d.get("achieved")
        spread = d.get("spread")
        return cls(
            uuid=d["uuid"],
            axes=dict(d.get("axes") or {}),
            status=d["status"],
            latency_ms=d.get("latency_ms"),
            reference_latency_ms=d.get("reference_latency_ms"),
            speedup=d.get("speedup"),
            max_abs_error=_decode_float(d.get("max_abs_error")),
            max_rel_error=_decode_float(d.get("max_rel_error")),
            achieved=Achieved(**achieved) if achieved else None,
            roofline_fraction=d.get("roofline_fraction"),
            floor_ms=d.get("floor_ms"),
            reason=d.get("reason") or "",
            log_tail=list(d.get("log_tail") or []),
            spread=Spread(**spread) if spread else None,
            timing_method=d.get("timing_method"),
            warnings=list(d.get("warnings") or []),
            decided_by=str(d.get("decided_by") or ""),
            samples=d.get("samples"),
            floor_peak=d.get("floor_peak"),
            clocks=d.get("clocks"),
            l2_policy=d.get("l2_policy"),
            busy_ms=d.get("busy_ms"),
        )


_TIMING_FIELDS = ("latency_ms", "reference_latency_ms", "speedup", "roofline_fraction", "floor_ms")
_ERROR_FIELDS = ("max_abs_error", "max_rel_error")
# Read back: the format's spellings, and the short ones older results files hold.
_NON_FINITE = {
    "Infinity": math.inf,
    "-Infinity": -math.inf,
    "NaN": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "nan": math.nan,
}


def _check_number(
    name: str, value: object, *, allow_none: bool = True, allow_nan: bool = False
) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}: found {value!r}, expected a number")
    if not allow_nan and not math.isfinite(value):
        raise ValueError(f"{name}: found {value}, expected a finite number")


def _decode_float(value: object) -> object:
    if isinstance(value, str) and value in _NON_FINITE:
        return _NON_FINITE[value]
    return value
