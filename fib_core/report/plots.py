"""The HTML report's charts, drawn with matplotlib as inline SVG text (the ``plot`` extra).

Every per-run chart is drawn over the definition's varying axis as a number (the axis with the
most distinct values; log scale where its values span a decade or more, as :mod:`.plot_scales`
rules), one point per shape: the median over the shape's workloads, a bar from the lowest to
the highest of them, and each workload as a faint dot. The kernel and the reference never share
a latency axis (they sit three or four decades apart, which flattens the kernel into steps):
the reference has its own panel.

matplotlib is optional: :func:`plots_available` says whether it imports, and every ``*_svg``
function returns None without it (the report then shows tables and says how to get plots).
Figures are built with ``matplotlib.figure.Figure`` directly, never pyplot, so drawing a
report changes no global backend or state of the contestant's process. Each SVG gets its own
id salt, so several of them inline in one page never share an element id.

A legend sits below its panel, never over the points, and is never wider than the panel: its
entries go in as many columns as fit, and a label too long for one line (a long solution
name) is wrapped, measured with the figure's own renderer before the SVG is written.

Example::

    svg = latency_svg(results, "fig-lat")   # "<svg ...>...</svg>" or None
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fib_core.report.baseline import BASELINE_LABEL, baseline_latencies, baseline_speedups
from fib_core.report.plot_scales import FONT, scale_x, scale_y
from fib_core.report.results import RunResults
from fib_core.report.shapes import plot_axis
from fib_core.report.workload_result import WorkloadResult

PLOT_HINT = 'plots need matplotlib: pip install -e ".[plot]"'
_WIDTH_IN = 11.0
_HEIGHT_IN = 3.8
# How far below its panel a legend starts: clear of the x tick labels and the x label (both
# FONT points high, with matplotlib's default pads between them).
_LEGEND_GAP_PT = 3.5 + 3.5 + FONT + 4 + FONT + 4
_MAX_SLANTED_LABELS = 36  # per-workload tick labels: upright beyond a third of this, then thinned
_LEGEND_FIT = 0.97  # a legend may take this share of its panel's width (browser fonts vary)
_COLORS = {
    "current": "#1f6feb",
    "previous": "#8b949e",
    "reference": "#bc4c00",
    "baseline": "#1a7f37",
    "floor": "#24292f",
    "bad": "#cf222e",
}


def plots_available() -> bool:
    """True when matplotlib imports (the ``plot`` extra is installed)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class HistoryPoint:
    """One recorded run on the history chart: its label ("11-27 09:40" and commit), its score,
    whether every workload passed, and its solution's hash (repeated runs share it)."""

    label: str
    score: float
    all_passed: bool
    solution: str


def latency_svg(results: RunResults, salt: str) -> str | None:
    """Kernel latency per shape with its roofline floor and the baseline; the reference beside."""
    rows = [r for r in results.rows if r.passed and r.latency_ms]
    if not rows or not plots_available():
        return None
    axis = plot_axis(rows) or ""
    has_ref = any(r.reference_latency_ms for r in rows)
    fig, axes = _figure(2 if has_ref else 1)
    ax = axes[0]
    unit, scale = _time_unit([r.latency_ms for r in rows])
    _series(ax, rows, axis, lambda r: r.latency_ms, scale, _COLORS["current"],
            f"{results.solution or 'your kernel'}: median, lowest-highest")
    floors = [r for r in rows if r.floor_ms]
    if floors:
        _line(ax, floors, axis, lambda r: r.floor_ms, scale, _COLORS["floor"], "roofline floor")
    base_ms = baseline_latencies(results)
    base = [r for r in rows if r.uuid in base_ms]
    if base:
        _series(ax, base, axis, lambda r: base_ms.get(r.uuid), scale, _COLORS["baseline"],
                BASELINE_LABEL,
                marker="s")
    _finish(ax, axis, f"latency ({unit})", "Your kernel per shape",
            [r.latency_ms * scale for r in rows] + [r.floor_ms * scale for r in floors], rows)
    if has_ref:
        ref_rows = [r for r in rows if r.reference_latency_ms]
        r_unit, r_scale = _time_unit([r.reference_latency_ms for r in ref_rows])
        _series(axes[1], ref_rows, axis, lambda r: r.reference_latency_ms, r_scale,
                _COLORS["reference"], "reference: median, lowest-highest", marker="D")
        _finish(axes[1], axis, f"latency ({r_unit})", "The Python reference (its own axis)",
                [r.reference_latency_ms * r_scale for r in ref_rows], ref_rows)
    return _svg(fig, salt)


def speedup_svg(results: RunResults, salt: str) -> str | None:
    """Speedup per shape: over the baseline (the contest's figure) where measured, and over
    the reference, each on its own axis."""
    rows = [r for r in results.rows if r.passed and r.latency_ms]
    panels: list[tuple[str, Callable[[WorkloadResult], float | None], str]] = []
    base_x = baseline_speedups(results)
    if base_x:
        panels.append((f"over the {BASELINE_LABEL} (contest)", lambda r: base_x.get(r.uuid),
                       _COLORS["baseline"]))
    if any(r.speedup for r in rows):
        panels.append(("over the reference", lambda r: r.speedup, _COLORS["reference"]))
    if not panels or not plots_available():
        return None
    axis = plot_axis(rows) or ""
    fig, axes = _figure(len(panels))
    for ax, (what, fig_of, color) in zip(axes, panels, strict=True):
        mine = [r for r in rows if fig_of(r)]
        _series(ax, mine, axis, fig_of, 1.0, color, "median, lowest-highest")
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
        _finish(ax, axis, "speedup (x)", f"Speedup {what}",
                [fig_of(r) or 1.0 for r in mine] + [1.0], mine)
    return _svg(fig, salt)


def roofline_svg(results: RunResults, salt: str) -> str | None:
    """% of the roofline floor each shape reaches (100 % = the hardware's limit)."""
    rows = [r for r in results.rows if r.passed and r.roofline_fraction is not None]
    if not rows or not plots_available():
        return None
    axis = plot_axis(rows) or ""
    fig, (ax,) = _figure(1, height=3.2)
    _series(ax, rows, axis, lambda r: r.roofline_fraction, 100.0, _COLORS["current"],
            "median, lowest-highest")
    ax.axhline(100.0, color="black", linewidth=0.8, linestyle=":")
    shares = [100.0 * (r.roofline_fraction or 0) for r in rows]
    # Log once the shares sit a decade or more below 100 % (0.6 % would lie on the x axis).
    _finish(ax, axis, "% of roofline", "Roofline floor / measured latency, per shape",
            [*shares, 100.0], rows)
    if ax.get_yscale() == "linear":
        ax.set_ylim(0, max(100.0, *shares) * 1.08)
    return _svg(fig, salt)


def history_svg(points: Sequence[HistoryPoint], ylabel: str, salt: str) -> str | None:
    """The score over the recorded runs, the y-axis from 0; where one solution was run several
    times unchanged, the range of its scores is shaded: the noise a change must beat."""
    if not points or not plots_available():
        return None
    fig, (ax,) = _figure(1, height=3.4)
    x = list(range(1, len(points) + 1))
    scores = [p.score for p in points]
    ax.plot(x, scores, "-", color=_COLORS["previous"], linewidth=1)
    for xi, p in zip(x, points, strict=True):
        ax.plot([xi], [p.score], "o", color=_COLORS["current"] if p.all_passed else _COLORS["bad"])
    labelled = False
    for first, last in _repeat_groups(points):
        group = scores[first : last + 1]
        ax.fill_between([x[first] - 0.3, x[last] + 0.3], min(group), max(group),
                        color=_COLORS["current"], alpha=0.2, edgecolor=_COLORS["current"],
                        linewidth=0.8, linestyle="--",
                        label=None if labelled else "repeated runs of one solution: noise")
        labelled = True
    ax.set_ylim(0, max(scores + [1.0]) * 1.15)
    ax.set_xlim(0.5, len(points) + 0.5)
    ax.set_xticks(x)
    step = max(1, math.ceil(len(points) / 16))  # at most 16 labels: each stays readable
    ax.set_xticklabels([p.label if (i % step == 0 or i == len(points) - 1) else ""
                        for i, p in enumerate(points)], fontsize=FONT - 1)
    ax.set_ylabel(ylabel)
    ax.set_title("Score over the recorded runs (red: a workload failed, scored 0)",
                 fontsize=FONT + 1)
    if labelled:
        ax.legend(loc="best", fontsize=FONT - 1)  # scores sit high, or at 0 where runs failed
    return _svg(fig, salt)


def overlay_svg(
    current: RunResults, previous: RunResults, noise_pct: dict[str, float], salt: str
) -> str | None:
    """Both runs' kernel latency per shape; the previous one inside its noise band."""
    rows = [r for r in current.rows if r.passed and r.latency_ms]
    prev_rows = [p for r in rows if (p := previous.row(r.uuid)) is not None
                 and p.passed and p.latency_ms]
    if not prev_rows or not plots_available():
        return None
    axis = plot_axis(rows) or ""
    fig, (ax,) = _figure(1)
    unit, scale = _time_unit([r.latency_ms for r in rows + prev_rows])
    xs, med, lo, hi = _medians(prev_rows, axis, lambda r: r.latency_ms, scale)
    band = {x: _median([noise_pct.get(p.uuid, 0.0) for p in prev_rows if _x(p, axis) == x])
            for x in xs}
    ax.fill_between(xs, [m * (1 - band[x] / 100) for x, m in zip(xs, med, strict=True)],
                    [m * (1 + band[x] / 100) for x, m in zip(xs, med, strict=True)],
                    color=_COLORS["previous"], alpha=0.25, label="previous run's noise band")
    ax.plot(xs, med, "s--", color=_COLORS["previous"], label="previous run (median)")
    _series(ax, rows, axis, lambda r: r.latency_ms, scale, _COLORS["current"],
            "this run: median, lowest-highest")
    _finish(ax, axis, f"latency ({unit})", "This run over the previous one, per shape",
            [r.latency_ms * scale for r in rows + prev_rows], rows)
    return _svg(fig, salt)


def cross_check_svg(rows: Sequence[Any], labels: Sequence[str], salt: str) -> str | None:
    """Each timer's latency divided by the device span, per workload (1.0 = agreement)."""
    ratio_rows = [r.ratios() for r in rows]
    methods = [
        m for m in ("profiler", "cupti", "events", "graph") if any(m in r for r in ratio_rows)
    ]
    if not methods or not plots_available():
        return None
    fig, (ax,) = _figure(1)
    width = 0.8 / len(methods)
    for k, method in enumerate(methods):
        xs = [i + (k - (len(methods) - 1) / 2) * width for i in range(len(rows))]
        ys = [r.get(method, math.nan) for r in ratio_rows]
        ax.bar(xs, ys, width=width, label=method)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_ylabel("latency / device span")
    ax.set_xticks(list(range(len(rows))))
    step = max(1, math.ceil(len(rows) / _MAX_SLANTED_LABELS))  # the rest stay ticks
    ax.set_xticklabels([label if i % step == 0 else "" for i, label in enumerate(labels)],
                       rotation=30 if len(rows) <= _MAX_SLANTED_LABELS // 3 else 90,
                       ha="right", va="center", rotation_mode="anchor", fontsize=FONT - 1)
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), borderaxespad=0.2, frameon=False,
              fontsize=FONT - 1, ncol=len(methods))  # above the bars, beside the title
    ax.set_title("Timer cross-check", fontsize=FONT + 1)
    return _svg(fig, salt)


# --- drawing helpers -------------------------------------------------------------------------


def _figure(panels: int, height: float = _HEIGHT_IN) -> tuple[Any, list[Any]]:
    # Imported here: matplotlib is optional (tables render without it) and takes ~0.9 s to load.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(_WIDTH_IN, height))
    FigureCanvasAgg(fig)  # a renderer to measure legends with (savefig still writes SVG)
    axes = [fig.add_subplot(1, panels, k + 1) for k in range(panels)]
    for ax in axes:
        ax.grid(True, which="major", alpha=0.3)
        ax.tick_params(labelsize=FONT)
    return fig, axes


def _x(row: WorkloadResult, axis: str) -> float:
    return float(row.axes.get(axis, 0))


def _medians(
    rows: Sequence[WorkloadResult], axis: str, fig_of: Callable, scale: float
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Per distinct x: the median, lowest and highest of ``fig_of`` (times ``scale``)."""
    groups: dict[float, list[float]] = {}
    for r in rows:
        value = fig_of(r)
        if value is not None:
            groups.setdefault(_x(r, axis), []).append(value * scale)
    xs = sorted(groups)
    return (xs, [_median(groups[x]) for x in xs], [min(groups[x]) for x in xs],
            [max(groups[x]) for x in xs])


def _series(
    ax: Any,
    rows: Sequence[WorkloadResult],
    axis: str,
    fig_of: Callable,
    scale: float,
    color: str,
    label: str,
    *,
    marker: str = "o",
) -> None:
    """Median per shape joined by a line, lowest-highest as error bars, workloads as dots."""
    xs, med, lo, hi = _medians(rows, axis, fig_of, scale)
    if not xs:
        return
    dots = [(_x(r, axis), v * scale) for r in rows if (v := fig_of(r)) is not None]
    ax.plot([d[0] for d in dots], [d[1] for d in dots], ".", color=color, alpha=0.25,
            markersize=4)
    ax.errorbar(xs, med, yerr=[[m - low for m, low in zip(med, lo, strict=True)],
                               [high - m for m, high in zip(med, hi, strict=True)]],
                fmt=f"{marker}-", color=color, capsize=3, markersize=5, linewidth=1.2,
                label=label)


def _line(ax: Any, rows: Sequence[WorkloadResult], axis: str, fig_of: Callable, scale: float,
          color: str, label: str) -> None:
    xs, med, _, _ = _medians(rows, axis, fig_of, scale)
    ax.plot(xs, med, "--", color=color, linewidth=1.2, label=label)


def _finish(
    ax: Any,
    axis: str,
    ylabel: str,
    title: str,
    values: Sequence[float],
    rows: Sequence[WorkloadResult],
) -> None:
    """Log y when ``values`` span a decade, the numeric x axis of ``rows``, labels, legend."""
    scale_y(ax, values)
    ax.set_ylabel(ylabel, fontsize=FONT)
    ax.set_title(title, fontsize=FONT + 1)
    _legend(ax)
    _x_axis(ax, axis, rows)


def _x_axis(ax: Any, axis: str, rows: Sequence[WorkloadResult]) -> None:
    scale_x(ax, axis, [_x(r, axis) for r in rows])


def _legend(ax: Any, *, ncol: int | None = None, wrap: int | None = None) -> Any:
    """The panel's legend below it, centred, ``ncol`` entries a row (all of them by default),
    each label wrapped at ``wrap`` characters (None: not wrapped); None without entries."""
    # Imported here: matplotlib is optional (tables render without it) and takes ~0.9 s to load.
    from matplotlib.transforms import offset_copy

    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    if wrap:
        labels = [_wrap(label, wrap) for label in labels]
    below = offset_copy(ax.transAxes, fig=ax.figure, y=-_LEGEND_GAP_PT, units="points")
    return ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                     bbox_transform=below, ncol=ncol or len(handles), fontsize=FONT - 1,
                     frameon=False, borderaxespad=0.2, columnspacing=1.2, handlelength=1.8)


def _wrap(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` characters, broken after a space or an
    underscore (a solution's or an axis's name has no spaces), mid-word only when one
    stretch between such breaks is longer than a line."""
    pieces = [p for p in re.split(r"(?<=[ _])", text) if p]
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1] + piece.rstrip()) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(textwrap.fill(line.rstrip(), width) for line in lines)


def _fit_legends(fig: Any) -> None:
    """Narrow every legend wider than its panel until it fits: fewer entries a row first,
    then shorter lines (such a legend goes below its panel). Measured with the figure's
    renderer after its layout."""
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        labels = ax.get_legend_handles_labels()[1]
        ncol, wrap = len(labels), max(len(label) for label in labels)
        while True:
            room = _LEGEND_FIT * ax.get_window_extent(renderer).width
            width = legend.get_window_extent(renderer).width
            if width <= room or (ncol == 1 and wrap <= 12):
                break
            if ncol > 1:
                ncol -= 1
            else:
                wrap = max(12, min(wrap - 1, int(wrap * room / width)))
            legend = _legend(ax, ncol=ncol, wrap=wrap if ncol == 1 else None)
        legend.set_in_layout(True)


def _repeat_groups(points: Sequence[HistoryPoint]) -> list[tuple[int, int]]:
    """(first, last) index of each run of consecutive points of one solution, two or more."""
    groups, start = [], 0
    for i in range(1, len(points) + 1):
        if i == len(points) or points[i].solution != points[start].solution:
            if i - start >= 2 and points[start].solution:
                groups.append((start, i - 1))
            start = i
    return groups


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        return 0.0
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _time_unit(values_ms: Sequence[float]) -> tuple[str, float]:
    """(unit, factor) so that the largest latency reads in us below 1 ms, in s from 1 s (a CPU
    smoke run), else in ms."""
    top = max(values_ms) if values_ms else 0.0
    if top < 1.0:
        return "us", 1e3
    return ("s", 1e-3) if top >= 1000.0 else ("ms", 1.0)


def _svg(fig: Any, salt: str) -> str:
    """The figure as an ``<svg>`` element (no XML prolog), element ids salted with ``salt``."""
    import matplotlib  # Imported here: optional and ~0.9 s to load, as in _figure.

    for ax in fig.axes:  # panels laid out first as if legends were not there: one too
        if ax.get_legend() is not None:  # wide would squeeze its panel, not be fitted to it
            ax.get_legend().set_in_layout(False)
    fig.tight_layout()
    _fit_legends(fig)
    fig.tight_layout()  # now with room below the panels for their legends
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg") :]
