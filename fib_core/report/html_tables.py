"""The report's two results tables: one row per shape, then one row per workload.

The shape table answers "how does my kernel do at each size" in a dozen lines; the workload
table keeps every figure a measurement is only valid with (samples, the timer actually used,
the clocks, the L2 cache's treatment, the roofline's assumed peak) and sorts and filters in
the browser (``html_assets.SCRIPT``).

Both fit a 1400 px window however many axes a definition varies and however long their names:
each varying axis is a narrow numeric column whose name may wrap at its underscores, headers
are short (a tooltip says what each holds), and the workload table's secondary columns (the
raw latencies behind each ratio, the timing conditions) wait behind its "all columns" box.

Example::

    page_part = shape_table(results) + workload_table(results, deltas={}, key="s0")
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

from fib_core.report.baseline import BASELINE_LABEL, baseline_latencies, baseline_speedups
from fib_core.report.compare import Delta
from fib_core.report.formats import fmt_error, fmt_ms, fmt_ms_range, fmt_speedup
from fib_core.report.html_assets import Column, e, table, td
from fib_core.report.results import RunResults
from fib_core.report.shapes import Band, by_shape, shape_axes, shape_text
from fib_core.report.workload_result import PASSED, WorkloadResult

_FLOOR_TIP = ("the roofline floor: the fastest the GPU allows (the workload's bytes at peak "
              "bandwidth or its flops at peak throughput, whichever is slower)")
_ROOFLINE_TIP = "roofline floor / latency: 100% is the hardware's limit"
_VS_BASELINE_TIP = f"the {BASELINE_LABEL}'s latency over the kernel's: the contest's figure"
_VS_REFERENCE_TIP = "the Python reference's latency over the kernel's"
_SPREAD_TIP = "spread of the timed calls: (p90 - p10) / latency; hover a cell for the range"


class _Cell(NamedTuple):
    """What a workload-table column shows for one row: the text, the value it sorts by, a
    tooltip, a style class, and whether a long text may wrap (at spaces and underscores)."""

    text: str
    v: float | str | None = None
    title: str | None = None
    cls: str = ""
    wrap: bool = False


_Columns = list[tuple[Column, Callable[[WorkloadResult], _Cell]]]


def shape_table(results: RunResults) -> str:
    """Per shape (a column per varying axis): passed, and each figure's median with its
    lowest-highest across the shape's workloads."""
    shapes = by_shape(results)
    if not shapes:
        return ""
    base = bool(baseline_latencies(results))
    # Column groups no shape has a figure for (a CPU smoke run: no floor, no reference) are
    # left out rather than shown as columns of dashes.
    floor = any(s.floor for s in shapes)
    ref = any(s.reference for s in shapes)
    head = [_axis_column(k) for k in shapes[0].axes]
    head += [Column("passed", title="passing workloads / workloads of this shape"),
             Column("latency", title="the kernel's median latency over the shape's workloads"),
             Column("range", title="the kernel's lowest-highest latency over the shape's "
                                   "workloads")]
    if floor:
        head += [Column("roofline floor", title=_FLOOR_TIP),
                 Column("% roofline", title=_ROOFLINE_TIP)]
    if base:
        head += [Column("baseline", title=f"the {BASELINE_LABEL}'s median latency"),
                 Column("vs baseline", title=_VS_BASELINE_TIP)]
    if ref:
        head += [Column("reference", title="the Python reference's median latency"),
                 Column("ref. range", title="the reference's lowest-highest latency and their "
                                           "ratio: the noise in every speedup over it"),
                 Column("vs reference", title=_VS_REFERENCE_TIP + " (median, lowest-highest)")]
    rows = []
    for s in shapes:
        cells = [td(str(v), v=v) for v in s.axes.values()]
        cells += [
            td(f"{s.passed}/{s.workloads}", v=s.passed,
               cls="" if s.passed == s.workloads else "fail"),
            _band_cell(s.kernel, fmt_ms),
            _range_cell(s.kernel),
        ]
        if floor:
            cells += [_band_cell(s.floor, fmt_ms), _band_cell(s.roofline, _pct)]
        if base:
            cells += [_band_cell(s.baseline, fmt_ms), _band_cell(s.baseline_speedup, fmt_speedup)]
        if ref:
            cells += [
                _band_cell(s.reference, fmt_ms),
                _range_cell(s.reference, ratio=True),
                _band_cell(s.speedup, _fmt_x, spread=True),
            ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<p class="note">medians over the passing workloads of each shape; a range is the '
        "lowest-highest between those workloads; hover a header for what it holds, click it "
        "to sort</p>"
        + '<div class="scroll">' + table(head, rows, cls="shapes sortable") + "</div>"
    )


def workload_table(results: RunResults, deltas: dict[str, Delta], key: str) -> str:
    """Every workload with every figure; sortable, filterable, its header kept in view.

    The main columns fit a 1400 px window; the secondary ones (busy time, samples, the raw
    latencies behind each ratio, the timing conditions) show with the "all columns" box."""
    names = shape_axes(results.rows)
    columns = _workload_columns(results, names)
    if deltas:
        columns += _delta_columns(deltas)
    rows = []
    for r in results.rows:
        cells = [(col, cell(r)) for col, cell in columns]
        rows.append(
            f'<tr data-uuid="{e(r.uuid)}" data-status="{e(r.status)}" '
            f'data-shape="{e(shape_text(r, names))}">'
            + "".join(td(c.text, v=c.v, title=c.title, cls=c.cls, left=not col.numeric,
                         wrap=c.wrap, more=col.more) for col, c in cells)
            + "</tr>"
        )
    table_id = f"{key}-workloads"
    head = [col for col, _ in columns]
    return (
        _filters(results.rows, names, table_id, more=sum(c.more for c in head))
        + '<div class="scroll">'
        + table(head, rows, cls="workloads sortable", table_id=table_id)
        + "</div>"
        + '<p class="note">latencies: the kernel\'s, timed as the timing column says; '
        "vs reference / vs baseline: their latency over the kernel's; p10-p90: the spread of "
        "the timed calls as a share of the latency (hover a cell for the range). Hover a "
        f"header for what it holds, click it to sort; {BASELINE_LABEL} columns appear where "
        "it was measured.</p>"
    )


def _workload_columns(results: RunResults, names: list[str]) -> _Columns:
    """The per-workload table's columns in their order, each with what it shows for a row
    (``more``: secondary, hidden until "all columns" is ticked)."""
    base_ms, base_x = baseline_latencies(results), baseline_speedups(results)
    cols: _Columns = [
        (Column("workload", numeric=False, title="the workload's uuid (hover a cell for all "
                "of it)"), lambda r: _Cell(r.short_uuid, title=r.uuid)),
        *((_axis_column(k), _axis_cell(k)) for k in names),
        (Column("status", numeric=False),
         lambda r: _Cell(r.status, cls="pass" if r.passed else "fail", wrap=True)),
        (Column("latency", title="the kernel's latency, timed as the timing column says"),
         _ms(lambda r: r.latency_ms)),
        (Column("busy", title="time the GPU ran your kernels within the latency's span",
                more=True), _ms(lambda r: r.busy_ms)),
        (Column("p10-p90", title=_SPREAD_TIP), _p10_p90),
        (Column("samples", title="timed calls behind the latency", more=True),
         lambda r: _Cell("-" if r.samples is None else str(r.samples), v=r.samples)),
        (Column("roofline floor", title=_FLOOR_TIP, more=True), _ms(lambda r: r.floor_ms)),
        (Column("peak assumed", numeric=False, title="the datasheet peak the floor assumes",
                more=True),
         lambda r: _Cell((r.floor_peak or "-").split(" (")[0], title=r.floor_peak,
                         wrap=True)),
        (Column("% roofline", title=_ROOFLINE_TIP),
         lambda r: _Cell(_pct(r.roofline_fraction), v=r.roofline_fraction)),
        (Column("achieved", title="throughput reached: GB/s if memory-bound, else TFLOP/s",
                more=True),
         lambda r: _Cell(str(r.achieved) if r.achieved else "-",
                         v=r.achieved.value if r.achieved else None)),
    ]
    if base_ms:
        cols += [
            (Column("baseline", title=f"the {BASELINE_LABEL}'s latency", more=True),
             _ms(lambda r: base_ms.get(r.uuid))),
            (Column("vs baseline", title=_VS_BASELINE_TIP),
             lambda r: _Cell(fmt_speedup(base_x.get(r.uuid)), v=base_x.get(r.uuid))),
        ]
    return cols + _check_columns()


def _check_columns() -> _Columns:
    """The reference's figures, the errors, and the conditions the timing was valid under."""
    return [
        (Column("reference", title="the Python reference's latency", more=True),
         _ms(lambda r: r.reference_latency_ms)),
        (Column("vs reference", title=_VS_REFERENCE_TIP),
         lambda r: _Cell(_fmt_x(r.speedup), v=r.speedup)),
        (Column("max abs err", title="largest absolute error of the outputs", more=True),
         lambda r: _Cell(fmt_error(r.max_abs_error), v=_finite(r.max_abs_error))),
        (Column("max rel err", title="largest relative error of the outputs"),
         lambda r: _Cell(fmt_error(r.max_rel_error), v=_finite(r.max_rel_error))),
        (Column("timing", numeric=False, title="the timer actually used", more=True),
         lambda r: _Cell(r.timing_method or "-")),
        (Column("clocks", numeric=False, title="the GPU clocks read before timing", more=True),
         lambda r: _Cell(r.clocks or "-", wrap=True)),
        (Column("L2", numeric=False, title="what was done to the L2 cache between timed calls",
                more=True), lambda r: _Cell(r.l2_policy or "-", wrap=True)),
    ]


def _delta_columns(deltas: dict[str, Delta]) -> _Columns:
    """The comparison with the previous run: its latency, the change, the noise, the verdict."""

    def of(r: WorkloadResult, name: str) -> float | None:
        delta = deltas.get(r.uuid)
        return None if delta is None else getattr(delta, name)

    def pct(value: float | None, fmt: str) -> _Cell:
        return _Cell("-" if value is None else fmt.format(value), v=value)

    def verdict(r: WorkloadResult) -> _Cell:
        delta = deltas.get(r.uuid)
        if delta is None:
            return _Cell("-")
        return _Cell(delta.verdict, cls=delta.verdict if delta.verdict in ("faster", "slower")
                     else "")

    return [
        (Column("previous", title="the previous run's latency", more=True),
         _ms(lambda r: of(r, "previous_ms"))),
        (Column("change", title="the latency now against the previous run's (negative: "
                "faster)"), lambda r: pct(of(r, "change_pct"), "{:+.1f}%")),
        (Column("noise", title="the noise a change must beat to count"),
         lambda r: pct(of(r, "noise_pct"), "±{:.1f}%")),
        (Column("verdict", numeric=False), verdict),
    ]


def _filters(rows: list[WorkloadResult], names: list[str], table_id: str, *, more: int) -> str:
    statuses = list(dict.fromkeys(r.status for r in rows))
    shapes = sorted({shape_text(r, names): _shape_sort(r, names) for r in rows}.items(),
                    key=lambda item: item[1])
    status_opts = ['<option value="">all</option>']
    if any(s != PASSED for s in statuses):
        status_opts.append('<option value="failed">failed (any)</option>')
    status_opts += [f'<option value="{e(s)}">{e(s)}</option>' for s in statuses]
    shape_opts = ['<option value="">all</option>'] + [
        f'<option value="{e(s)}">{e(s)}</option>' for s, _ in shapes
    ]
    return (
        f'<div class="filters" data-for="{e(table_id)}">'
        f'<label>status <select class="status">{"".join(status_opts)}</select></label>'
        f'<label>shape <select class="shape">{"".join(shape_opts)}</select></label>'
        '<label title="busy time, samples, the raw latencies behind each ratio, the timing '
        'conditions; the table then scrolls sideways"><input type="checkbox" class="more"> '
        f"all columns (+{more})</label>"
        '<span class="shown note"></span></div>'
    )


def _axis_column(name: str) -> Column:
    return Column(name, title=f"the workload's {name} (a var axis of the definition)")


def _axis_cell(name: str) -> Callable[[WorkloadResult], _Cell]:
    return lambda r: _Cell(str(r.axes.get(name, "-")), v=r.axes.get(name))


def _ms(fig: Callable[[WorkloadResult], float | None]) -> Callable[[WorkloadResult], _Cell]:
    """A latency column's cell: the figure with its unit, sorted by its value."""
    return lambda r: _Cell(fmt_ms(fig(r)), v=fig(r))


def _p10_p90(r: WorkloadResult) -> _Cell:
    """The spread of the timed calls as a share of the latency; the range as its tooltip."""
    s = r.spread
    if r.samples == 1:  # p10 = p90 = the one call: no spread measured, not a spread of 0
        return _Cell("-", title="one timed call: no spread")
    if not s or s.p10_ms is None or s.p90_ms is None:
        return _Cell("-")
    width = s.relative_width(r.latency_ms)
    return _Cell("-" if width is None else f"{100 * width:.1f}%", v=width,
                 title=f"p10-p90: {fmt_ms_range(s.p10_ms, s.p90_ms)}")


def _band_cell(band: Band | None, fmt: Callable, *, spread: bool = False) -> str:
    if band is None:
        return td("-")
    text = fmt(band.median)
    if spread and band.n > 1:
        text += f" ({fmt(band.low)}-{fmt(band.high)})"
    return td(text, v=band.median)


def _range_cell(band: Band | None, *, ratio: bool = False) -> str:
    if band is None or band.n < 2:  # one workload: no spread to show
        return td("-")
    text = fmt_ms_range(band.low, band.high)
    if ratio and band.n > 1:
        text += f" ({band.ratio:.2f}x)"
    return td(text, v=band.ratio)


def _shape_sort(r: WorkloadResult, names: list[str]) -> str:
    """A text that sorts shapes numerically: each axis value zero-padded."""
    return "|".join(f"{r.axes.get(k, 0):012d}" for k in names) or r.uuid


def _fmt_x(x: float | None) -> str:
    """A speedup with the digits its noise allows: ``1.35x``, ``8677x``."""
    if x is None:
        return "-"
    return f"{x:.0f}x" if x >= 100 else f"{x:.2f}x"


def _pct(fraction: float | None) -> str:
    return "-" if fraction is None else f"{100 * fraction:.1f}%"


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None
