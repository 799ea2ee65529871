"""The HTML report's charts, drawn with matplotlib as inline SVG text (the ``plot`` extra).

matplotlib is optional: :func:`plots_available` says whether it imports, and every ``*_svg``
function returns None without it (the report then shows tables and says how to get plots).
Figures are built with ``matplotlib.figure.Figure`` directly, never pyplot, so drawing a
report changes no global backend or state of the contestant's process. Each SVG gets its own
id salt, so several of them inline in one page never share an element id.

Example::

    svg = latency_svg(results, "fig-lat")   # "<svg ...>...</svg>" or None
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from fib_core.report.results import RunResults, WorkloadResult

PLOT_HINT = 'plots need matplotlib: pip install -e ".[plot]"'
_WIDTH_IN = 9.0
_HEIGHT_IN = 3.6
_COLORS = {"current": "#1f6feb", "previous": "#8b949e", "reference": "#d29922", "bad": "#cf222e"}


def plots_available() -> bool:
    """True when matplotlib imports (the ``plot`` extra is installed)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def workload_labels(rows: Sequence[WorkloadResult]) -> list[str]:
    """Tick labels: the axes that vary between the rows (all axes when only one row)."""
    if not rows:
        return []
    keys = list(rows[0].axes)
    varying = [k for k in keys if len({r.axes.get(k) for r in rows}) > 1] or keys
    return [", ".join(f"{k}={r.axes.get(k)}" for k in varying) or r.short_uuid for r in rows]


def latency_svg(results: RunResults, salt: str) -> str | None:
    """Latency per workload (log scale), p10-p90 as error bars, with the reference's latency."""
    rows = [r for r in results.rows if r.passed and r.latency_ms]
    if not rows or not plots_available():
        return None
    fig, ax = _figure()
    x = list(range(len(rows)))
    scale, unit = _time_unit([r.latency_ms for r in rows])
    _plot_run_latency(ax, x, rows, scale, f"{results.solution or 'solution'} (p10-p90)")
    ref = [
        (i, r.reference_latency_ms) for i, r in zip(x, rows, strict=True) if r.reference_latency_ms
    ]
    if ref:
        ax.plot(
            [i for i, _ in ref],
            [v * scale for _, v in ref],
            "s--",
            color=_COLORS["reference"],
            label="reference",
        )
    return _latency_figure(fig, ax, rows, unit, "Latency per workload", salt)


def speedup_svg(results: RunResults, salt: str) -> str | None:
    """Speedup over the reference per workload, with the range the latency spread allows."""
    rows = [r for r in results.rows if r.passed and r.speedup and r.latency_ms]
    if not rows or not plots_available():
        return None
    fig, ax = _figure()
    x = list(range(len(rows)))
    y = [r.speedup for r in rows]
    lo, hi = [], []
    for r in rows:
        ref = r.reference_latency_ms or r.speedup * r.latency_ms
        p10 = r.spread.p10_ms if r.spread and r.spread.p10_ms else r.latency_ms
        p90 = r.spread.p90_ms if r.spread and r.spread.p90_ms else r.latency_ms
        lo.append(max(0.0, r.speedup - ref / p90))
        hi.append(max(0.0, ref / p10 - r.speedup))
    colors = [_COLORS["current"] if s >= 1 else _COLORS["bad"] for s in y]
    ax.bar(x, y, color=colors, yerr=[lo, hi], capsize=3)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_ylabel("speedup (x)")
    _workload_axis(ax, rows)
    ax.set_title("Speedup over the reference (error bars: p10-p90 of the latency)")
    return _svg(fig, salt)


def roofline_svg(results: RunResults, salt: str) -> str | None:
    """% of the roofline floor each workload reaches (100 % = the hardware's limit)."""
    rows = [r for r in results.rows if r.passed and r.roofline_fraction is not None]
    if not rows or not plots_available():
        return None
    fig, ax = _figure()
    x = list(range(len(rows)))
    ax.bar(x, [100.0 * r.roofline_fraction for r in rows], color=_COLORS["current"])
    ax.axhline(100.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_ylabel("% of roofline")
    _workload_axis(ax, rows)
    ax.set_title("Roofline: floor / measured latency")
    return _svg(fig, salt)


def history_svg(points: Sequence[tuple[str, float, bool]], salt: str) -> str | None:
    """Score over the ledger's runs: ``points`` are (run label, score, all passed)."""
    if not points or not plots_available():
        return None
    fig, ax = _figure(height=3.0)
    x = list(range(1, len(points) + 1))
    ax.plot(x, [p[1] for p in points], "-", color=_COLORS["previous"], linewidth=1)
    for xi, (_, score, ok) in zip(x, points, strict=True):
        ax.plot([xi], [score], "o", color=_COLORS["current"] if ok else _COLORS["bad"])
    best = max(range(len(points)), key=lambda i: (points[i][1], i))
    ax.annotate(
        "best",
        (x[best], points[best][1]),
        textcoords="offset points",
        xytext=(0, 8),
        ha="center",
        fontsize=8,
    )
    ax.set_xticks(x)
    ax.set_xticklabels([p[0] for p in points], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("score (mean speedup)")
    ax.set_title("Score over the recorded runs (red: a workload failed, scored 0)")
    return _svg(fig, salt)


def overlay_svg(
    current: RunResults, previous: RunResults, noise_pct: dict[str, float], salt: str
) -> str | None:
    """Both runs' latency per workload, the previous one inside its noise band."""
    rows = [r for r in current.rows if r.passed and r.latency_ms]
    pairs = [(r, previous.row(r.uuid)) for r in rows]
    pairs = [(r, p) for r, p in pairs if p is not None and p.passed and p.latency_ms]
    if not pairs or not plots_available():
        return None
    fig, ax = _figure()
    x = list(range(len(pairs)))
    scale, unit = _time_unit([p.latency_ms for _, p in pairs] + [r.latency_ms for r, _ in pairs])
    prev = [p.latency_ms * scale for _, p in pairs]
    band = [noise_pct.get(r.uuid, 0.0) / 100.0 for r, _ in pairs]
    ax.fill_between(
        x,
        [v * (1 - b) for v, b in zip(prev, band, strict=True)],
        [v * (1 + b) for v, b in zip(prev, band, strict=True)],
        color=_COLORS["previous"],
        alpha=0.25,
        step="mid",
        label="noise band",
    )
    ax.plot(x, prev, "s--", color=_COLORS["previous"], label="previous run")
    cur_rows = [r for r, _ in pairs]
    _plot_run_latency(ax, x, cur_rows, scale, "this run (p10-p90)")
    return _latency_figure(fig, ax, cur_rows, unit, "This run over the previous one", salt)


def cross_check_svg(rows: Sequence[Any], labels: Sequence[str], salt: str) -> str | None:
    """Each timer's latency divided by the device span, per workload (1.0 = agreement)."""
    ratio_rows = [r.ratios() for r in rows]
    methods = [
        m for m in ("profiler", "cupti", "events", "graph") if any(m in r for r in ratio_rows)
    ]
    if not methods or not plots_available():
        return None
    fig, ax = _figure()
    width = 0.8 / len(methods)
    for k, method in enumerate(methods):
        xs = [i + (k - (len(methods) - 1) / 2) * width for i in range(len(rows))]
        ys = [r.get(method, math.nan) for r in ratio_rows]
        ax.bar(xs, ys, width=width, label=method)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_ylabel("latency / device span")
    ax.set_xticks(list(range(len(rows))))
    ax.set_xticklabels(list(labels), rotation=30, ha="right", fontsize=7)
    ax.legend(loc="best", fontsize=8)
    ax.set_title("Timer cross-check")
    return _svg(fig, salt)


def _figure(height: float = _HEIGHT_IN) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(_WIDTH_IN, height))
    ax = fig.add_subplot(1, 1, 1)
    ax.grid(True, axis="y", alpha=0.3)
    return fig, ax


def _plot_run_latency(
    ax: Any, x: Sequence[int], rows: Sequence[WorkloadResult], scale: float, label: str
) -> None:
    """A run's latency per workload, its p10-p90 spread as error bars."""
    lo, hi = _error_bars(rows, scale)
    y = [r.latency_ms * scale for r in rows]
    ax.errorbar(x, y, yerr=[lo, hi], fmt="o-", color=_COLORS["current"], capsize=3, label=label)


def _latency_figure(
    fig: Any, ax: Any, rows: Sequence[WorkloadResult], unit: str, title: str, salt: str
) -> str:
    """The latency plots' common finish: log axis in ``unit``, workload labels, legend."""
    ax.set_yscale("log")
    ax.set_ylabel(f"latency ({unit})")
    _workload_axis(ax, rows)
    ax.legend(loc="best", fontsize=8)
    ax.set_title(title)
    return _svg(fig, salt)


def _workload_axis(ax: Any, rows: Sequence[WorkloadResult]) -> None:
    ax.set_xticks(list(range(len(rows))))
    ax.set_xticklabels(workload_labels(rows), rotation=30, ha="right", fontsize=7)
    ax.set_xlabel("workload (axes)")


def _time_unit(values_ms: Sequence[float]) -> tuple[float, str]:
    """(factor, unit) so that the largest latency reads in us below 1 ms, else in ms."""
    return (1e3, "us") if values_ms and max(values_ms) < 1.0 else (1.0, "ms")


def _error_bars(
    rows: Sequence[WorkloadResult], scale: float = 1.0
) -> tuple[list[float], list[float]]:
    lo, hi = [], []
    for r in rows:
        s = r.spread
        lo.append(max(0.0, r.latency_ms - s.p10_ms) * scale if s and s.p10_ms is not None else 0.0)
        hi.append(max(0.0, s.p90_ms - r.latency_ms) * scale if s and s.p90_ms is not None else 0.0)
    return lo, hi


def _svg(fig: Any, salt: str) -> str:
    """The figure as an ``<svg>`` element (no XML prolog), element ids salted with ``salt``."""
    import matplotlib

    fig.tight_layout()
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg") :]
