"""The report's two results tables: one row per shape, then one row per workload.

The shape table answers "how does my kernel do at each size" in a dozen lines; the workload
table keeps every figure a measurement is only valid with (samples, the timer actually used,
the clocks, the L2 cache's treatment, the roofline's assumed peak) and sorts and filters in
the browser (``html_assets.SCRIPT``).

Example::

    page_part = shape_table(results) + workload_table(results, deltas={}, key="s0")
"""

from __future__ import annotations

from collections.abc import Callable

from fib_core.report.baseline import BASELINE_LABEL, baseline_latencies, baseline_speedups
from fib_core.report.compare import Delta
from fib_core.report.html_assets import e, table, td
from fib_core.report.render import fmt_error, fmt_ms, fmt_ms_range, fmt_speedup
from fib_core.report.results import PASSED, RunResults, WorkloadResult
from fib_core.report.shapes import Band, by_shape, shape_axes, shape_text


def shape_table(results: RunResults) -> str:
    """Per shape: workloads, passed, and each figure's median with its lowest-highest."""
    shapes = by_shape(results)
    if not shapes:
        return ""
    base = bool(baseline_latencies(results))
    # Column groups no shape has a figure for (a CPU smoke run: no floor, no reference) are
    # left out rather than shown as columns of dashes.
    floor = any(s.floor for s in shapes)
    ref = any(s.reference for s in shapes)
    head = [("shape", False), ("workloads", True), ("passed", True), ("latency", True),
            ("lowest-highest", True)]
    if floor:
        head += [("roofline floor", True), ("% roofline", True)]
    if base:
        head += [("baseline", True), ("vs baseline", True)]
    if ref:
        head += [("reference", True), ("reference lowest-highest", True), ("vs reference", True)]
    rows = []
    for s in shapes:
        cells = [
            td(s.label, left=True, v="|".join(f"{v:012d}" for v in s.axes.values())),
            td(str(s.workloads), v=s.workloads),
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
        '<p class="note">medians over the passing workloads of each shape; lowest-highest is '
        "the spread between those workloads; click a header to sort</p>"
        + '<div class="scroll">' + table(head, rows, cls="shapes sortable") + "</div>"
    )


def workload_table(results: RunResults, deltas: dict[str, Delta], key: str) -> str:
    """Every workload with every figure; sortable, filterable, its header kept in view."""
    names = shape_axes(results.rows)
    base_ms, base_x = baseline_latencies(results), baseline_speedups(results)
    base = bool(base_ms)
    head = [("workload", False), ("shape", False), ("status", False), ("latency", True),
            ("busy", True), ("p10-p90", True), ("samples", True), ("roofline floor", True),
            ("peak assumed", False), ("% roofline", True), ("achieved", True)]
    if base:
        head += [("baseline", True), ("vs baseline", True)]
    head += [("reference", True), ("vs reference", True), ("max abs err", True),
             ("max rel err", True), ("timing", False), ("clocks", False), ("L2", False)]
    if deltas:
        head += [("previous", True), ("change", True), ("noise", True), ("verdict", False)]
    rows = []
    for r in results.rows:
        shape = shape_text(r, names)
        cells = [
            td(r.short_uuid, left=True, title=r.uuid),
            td(shape, left=True, title=r.axes_text(), v=_shape_sort(r, names)),
            td(r.status, left=True, cls="pass" if r.passed else "fail"),
            td(fmt_ms(r.latency_ms), v=r.latency_ms),
            td(fmt_ms(r.busy_ms) if r.busy_ms is not None else "-", v=r.busy_ms,
               title="time the GPU ran your kernels within the latency's span"),
            _p10_p90(r),
            td(_int(r.samples), v=r.samples),
            td(fmt_ms(r.floor_ms), v=r.floor_ms),
            td((r.floor_peak or "-").split(" (")[0], left=True, title=r.floor_peak),
            td(_pct(r.roofline_fraction), v=r.roofline_fraction),
            td(str(r.achieved) if r.achieved else "-", v=r.achieved.value if r.achieved else None),
        ]
        if base:
            b_ms, b_x = base_ms.get(r.uuid), base_x.get(r.uuid)
            cells += [td(fmt_ms(b_ms), v=b_ms), td(fmt_speedup(b_x), v=b_x)]
        cells += [
            td(fmt_ms(r.reference_latency_ms), v=r.reference_latency_ms),
            td(fmt_speedup(r.speedup), v=r.speedup),
            td(fmt_error(r.max_abs_error), v=_finite(r.max_abs_error)),
            td(fmt_error(r.max_rel_error), v=_finite(r.max_rel_error)),
            td(r.timing_method or "-", left=True),
            td(r.clocks or "-", left=True),
            td(r.l2_policy or "-", left=True),
        ]
        if deltas:
            cells += _delta_cells(deltas.get(r.uuid))
        rows.append(
            f'<tr data-uuid="{e(r.uuid)}" data-status="{e(r.status)}" data-shape="{e(shape)}">'
            + "".join(cells) + "</tr>"
        )
    table_id = f"{key}-workloads"
    return (
        _filters(results.rows, names, table_id)
        + '<div class="scroll">'
        + table(head, rows, cls="workloads sortable", table_id=table_id)
        + "</div>"
        + f'<p class="note">latencies: the kernel\'s, timed as the timing column says; '
        f"vs reference / vs baseline: their latency over the kernel's. Click a header to sort; "
        f"{BASELINE_LABEL} columns appear where it was measured.</p>"
    )


def _filters(rows: list[WorkloadResult], names: list[str], table_id: str) -> str:
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
        '<span class="shown note"></span></div>'
    )


def _delta_cells(d: Delta | None) -> list[str]:
    if d is None:
        return [td("-")] * 3 + [td("-", left=True)]
    change = "-" if d.change_pct is None else f"{d.change_pct:+.1f}%"
    noise = "-" if d.noise_pct is None else f"±{d.noise_pct:.1f}%"
    cls = {"faster": "faster", "slower": "slower"}.get(d.verdict, "")
    return [
        td(fmt_ms(d.previous_ms), v=d.previous_ms),
        td(change, v=d.change_pct),
        td(noise, v=d.noise_pct),
        td(d.verdict, left=True, cls=cls),
    ]


def _p10_p90(r: WorkloadResult) -> str:
    s = r.spread
    if not s or s.p10_ms is None or s.p90_ms is None:
        return td("-")
    width = s.relative_width(r.latency_ms)
    return td(fmt_ms_range(s.p10_ms, s.p90_ms), v=width,
              title=None if width is None else f"{100 * width:.1f}% of the latency")


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


def _int(n: int | None) -> str:
    return "-" if n is None else str(n)


def _finite(x: float | None) -> float | None:
    import math

    return x if x is not None and math.isfinite(x) else None
