"""Workloads grouped by shape: one row per distinct value of the axes that vary in a run.

A definition's workloads repeat shapes (GDN decode: 54 workloads over a dozen batch sizes, ten
of them at batch 1), differing only by their input data. Read per workload they smear; read
per shape they answer what a contestant asks: how does my kernel scale, how close to the
roofline, and how noisy is each figure. Each figure of a shape is a :class:`Band`: the median
over the shape's passing workloads and the lowest and highest of them.

Example::

    from fib_core.report.shapes import by_shape
    for shape in by_shape(results):
        print(shape.label, shape.kernel.median if shape.kernel else "-")
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fib_core.report.baseline import baseline_latencies, baseline_speedups
from fib_core.report.results import RunResults
from fib_core.report.workload_result import WorkloadResult


@dataclass(frozen=True)
class Band:
    """Median, lowest and highest of one figure over a shape's workloads."""

    median: float
    low: float
    high: float
    n: int

    @property
    def ratio(self) -> float:
        """highest / lowest: 1.0 when every workload of the shape agrees."""
        return self.high / self.low if self.low > 0 else float("inf")

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Band | None:
        known = [v for v in values if v is not None]
        if not known:
            return None
        return cls(statistics.median(known), min(known), max(known), len(known))


@dataclass(frozen=True)
class ShapeStats:
    """One shape's figures; latencies in ms, ``roofline`` as a fraction (1.0 = at the floor)."""

    axes: dict[str, int]
    workloads: int
    passed: int
    kernel: Band | None
    floor: Band | None
    roofline: Band | None
    reference: Band | None
    speedup: Band | None
    baseline: Band | None
    baseline_speedup: Band | None

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.axes.items())


def shape_axes(rows: Sequence[WorkloadResult]) -> list[str]:
    """The axes whose value differs between rows (all of them when none differs)."""
    if not rows:
        return []
    names = list(dict.fromkeys(k for r in rows for k in r.axes))
    varying = [k for k in names if len({r.axes.get(k) for r in rows}) > 1]
    return varying or names


def plot_axis(rows: Sequence[WorkloadResult]) -> str | None:
    """The axis a plot puts on x: of the varying ones, the one with the most distinct values."""
    names = shape_axes(rows)
    if not names:
        return None
    return max(names, key=lambda k: (len({r.axes.get(k) for r in rows}), -names.index(k)))


def shape_of(row: WorkloadResult, names: Sequence[str]) -> dict[str, int]:
    return {k: row.axes[k] for k in names if k in row.axes}


def shape_text(row: WorkloadResult, names: Sequence[str]) -> str:
    """The row's shape as the report writes it: ``batch_size=48`` (its uuid when axis-less)."""
    return ", ".join(f"{k}={v}" for k, v in shape_of(row, names).items()) or row.short_uuid


def by_shape(results: RunResults) -> list[ShapeStats]:
    """One :class:`ShapeStats` per shape of ``results``, ordered by axis value (numerically)."""
    rows = results.rows
    base, base_x = baseline_latencies(results), baseline_speedups(results)
    names = shape_axes(rows)
    groups: dict[tuple, list[WorkloadResult]] = {}
    for row in rows:
        groups.setdefault(tuple(row.axes.get(k) for k in names), []).append(row)
    out = []
    for key in sorted(groups, key=_sort_key):
        members = groups[key]
        ok = [r for r in members if r.passed]

        def band(fig: Callable[[WorkloadResult], float | None], ok=ok) -> Band | None:
            return Band.of([fig(r) for r in ok])

        out.append(
            ShapeStats(
                axes=shape_of(members[0], names),
                workloads=len(members),
                passed=len(ok),
                kernel=band(lambda r: r.latency_ms),
                floor=band(lambda r: r.floor_ms),
                roofline=band(lambda r: r.roofline_fraction),
                reference=band(lambda r: r.reference_latency_ms),
                speedup=band(lambda r: r.speedup),
                baseline=band(lambda r: base.get(r.uuid)),
                baseline_speedup=band(lambda r: base_x.get(r.uuid)),
            )
        )
    return out


def worst_reference_spread(shapes: Sequence[ShapeStats]) -> ShapeStats | None:
    """The shape whose reference latency varies most between its workloads (None if no shape
    has two timed references): the noise every speedup over the reference carries."""
    timed = [(s.reference.ratio, i) for i, s in enumerate(shapes)
             if s.reference is not None and s.reference.n > 1]
    return shapes[max(timed)[1]] if timed else None


def _sort_key(key: tuple) -> tuple:
    return tuple((0, v) if isinstance(v, int | float) else (1, str(v)) for v in key)
