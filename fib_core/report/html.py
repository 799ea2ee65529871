"""One self-contained HTML page of results: tables, inline SVG plots, no network access.

A page has one section per definition. Each section opens with the score that counts (the
contest score over the FlashInfer baseline where it was measured, else the speedup over the
reference, named as such) and how noisy the reference is; then, per shape, the kernel's
latency with its roofline floor and the baseline, the reference in its own panel, speedups
and % of roofline (plots over the varying axis as a number) and a table; then every workload
in a table that sorts and filters; the comparison with a previous run; the score over the
ledger's history with the noise of repeated runs; the timer cross-check when the run had one;
the failures with their reasons; and the environment.

Everything is escaped; the only markup from elsewhere is matplotlib's SVG; the one script is
inline and the page's Content-Security-Policy forbids fetching anything. Without matplotlib
the page still has every table and says how to get the plots.

Example::

    from fib_core.report.html import ReportSection, build_html
    page = build_html([ReportSection(record, previous=older, history=records)])
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fib_core.atomic import atomic_write_text
from fib_core.bench.cross_check import METHODS, MODEL_NOTE, NEEDS_GPU, CrossCheckRow
from fib_core.report import plots
from fib_core.report.baseline import contest_score
from fib_core.report.compare import Delta, comparability_warning, compare
from fib_core.report.formats import fmt_ms
from fib_core.report.headline import headline, score_text
from fib_core.report.history import history_rows
from fib_core.report.html_assets import CSP, CSS, SCRIPT, e, table, td
from fib_core.report.html_tables import shape_table, workload_table
from fib_core.report.ledger import LedgerRecord
from fib_core.report.shapes import plot_axis, shape_axes
from fib_core.report.summary import summarize

_e, _td = e, td


@dataclass
class ReportSection:
    """One definition's part of the page: its run, what it is compared with, its history."""

    record: LedgerRecord
    previous: LedgerRecord | None = None
    history: Sequence[LedgerRecord] = field(default_factory=list)


def build_html(sections: Sequence[ReportSection], *, title: str = "Benchmark report") -> str:
    """The whole page as a string (UTF-8 HTML5)."""
    have_plots = plots.plots_available()
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="note">generated {_e(datetime.now(UTC).isoformat(timespec="seconds"))}; '
        f"{len(sections)} definition(s)</p>",
    ]
    if not have_plots:
        parts.append(f'<p class="banner" id="no-plots">{_e(plots.PLOT_HINT)}; tables only.</p>')
    if not sections:
        parts.append("<p>No recorded run to report.</p>")
    for k, section in enumerate(sections):
        parts.append(_section(section, f"s{k}"))
    parts.append(f"<script>{SCRIPT}</script>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(
    path: str | Path,
    record: LedgerRecord,
    *,
    history: Sequence[LedgerRecord] = (),
    previous: LedgerRecord | None = None,
) -> Path:
    """Write the page of one run (with its definition's history) atomically to ``path``."""
    same = [r for r in history if r.definition == record.definition]
    page = build_html([ReportSection(record, previous=previous, history=same)])
    path = Path(path)
    atomic_write_text(path, page)
    return path


def _section(sec: ReportSection, key: str) -> str:
    rec, res = sec.record, sec.record.results
    summary = summarize(res)
    head = headline(res)
    out = [f'<section id="{key}"><h2>{_e(rec.definition)}</h2>']
    out.append(
        f'<p class="score" id="{key}-headline" data-kind="{_e(head.kind)}">{_e(head.title)} · '
        f"passed {summary.passed}/{summary.total}</p>"
    )
    if head.details:
        out.append('<ul class="details">' + "".join(f"<li>{_e(d)}</li>" for d in head.details)
                   + "</ul>")
    methods = ", ".join(sorted({r.timing_method for r in res.rows if r.timing_method})) or "-"
    out.append(
        f'<p class="note">run {_e(rec.run_id)} · solution {_e(rec.solution_name or "?")} '
        f"({_e((rec.solution_hash or '?')[:12])}) · commit {_e(rec.git.label())} · "
        f"{_e(_machine(res))} · timed with {_e(methods)} · {_e(rec.created)}</p>"
    )
    if res.is_cpu_smoke:
        out.append(f'<p class="banner">{_e(res.mode)}</p>')
    deltas: dict[str, Delta] = {}
    if sec.previous is not None:
        deltas = {d.uuid: d for d in compare(res, sec.previous.results)}
    out.append("<h3>Per shape</h3>")
    for name, svg in (
        ("latency", plots.latency_svg(res, f"{key}-lat")),
        ("speedup", plots.speedup_svg(res, f"{key}-spd")),
        ("roofline", plots.roofline_svg(res, f"{key}-roof")),
    ):
        if svg:
            out.append(f'<figure class="plot" data-plot="{name}">{svg}</figure>')
    out.append(_axis_note(res))
    out.append(shape_table(res))
    out.append(f"<h3>Per workload ({len(res.rows)})</h3>")
    out.append(workload_table(res, deltas, key))
    if sec.previous is not None:
        out.append(_comparison(sec, deltas, key))
    out.append(_history(sec, key))
    out.append(_cross_check(rec, key))
    out.append(_failures(rec))
    out.append(_environment(rec))
    out.append("</section>")
    return "\n".join(p for p in out if p)


def _axis_note(res) -> str:
    """When several axes vary, the plots' x is one of them: say what a point gathers."""
    axis = plot_axis(res.rows)
    others = [k for k in shape_axes(res.rows) if k != axis]
    if not axis or not others:
        return ""
    return (
        f'<p class="note">The plots\' x is {_e(axis)}; a point gathers every workload at one '
        f"{_e(axis)}, whatever its {_e(', '.join(others))} (the table below has each shape).</p>"
    )


def _machine(res) -> str:
    """The GPU's name once (the trace's hardware string repeats it), else the hardware."""
    return str(res.gpu_name or res.environment.get("hardware") or res.device)


def _comparison(sec: ReportSection, deltas: dict[str, Delta], key: str) -> str:
    prev = sec.previous
    assert prev is not None
    res = sec.record.results
    counts: dict[str, int] = {}
    for d in deltas.values():
        counts[d.verdict] = counts.get(d.verdict, 0) + 1
    out = [
        "<h3>Compared with a previous run</h3>",
        f'<p class="note" id="{key}-compared">previous: run {_e(prev.run_id)} (commit '
        f"{_e(prev.git.label())}, score {_e(score_text(prev.results))}) → this run: score "
        f"{_e(score_text(res))}; "
        + _e(", ".join(f"{n} {v}" for v, n in counts.items()) or "nothing to compare")
        + "</p>",
    ]
    warning = comparability_warning(res, prev.results)
    if warning:
        out.append(f'<p class="banner">warning: {_e(warning)}</p>')
    noise = {u: d.noise_pct for u, d in deltas.items() if d.noise_pct is not None}
    svg = plots.overlay_svg(res, prev.results, noise, f"{key}-ovl")
    if svg:
        out.append(f'<figure class="plot" data-plot="overlay">{svg}</figure>')
    missing = [d for d in deltas.values() if d.verdict == "missing"]
    if missing:
        out.append(
            '<p class="note">in the previous run only: '
            + _e(", ".join(d.uuid[:8] for d in missing))
            + "</p>"
        )
    return "\n".join(out)


def _history(sec: ReportSection, key: str) -> str:
    runs = [r for r in sec.history if r.definition == sec.record.definition]
    if not any(r.run_id == sec.record.run_id for r in runs):
        runs = [*runs, sec.record]
    if len(runs) < 2:
        return '<h3>History</h3><p class="note">the first recorded run of this definition</p>'

    contest = {r.run_id: contest_score(r.results) for r in runs if r.has_score}
    by_contest = bool(contest) and all(v is not None for v in contest.values())
    points = [  # a CPU smoke run has no score to plot
        plots.HistoryPoint(
            f"{_when(r.created)}\n{r.git.label()}",
            float(contest[r.run_id]) if by_contest else r.score,  # type: ignore[arg-type]
            r.passed == r.total and r.total > 0,
            r.solution_hash or "",
        )
        for r in runs
        if r.has_score
    ]
    out = ["<h3>History</h3>"]
    ylabel = "contest score (x)" if by_contest else "speedup over the reference (x)"
    svg = plots.history_svg(points, ylabel, f"{key}-hist")
    if svg:
        out.append(f'<figure class="plot" data-plot="history">{svg}</figure>')
    if points and not any(
        a.solution == b.solution for a, b in zip(points, points[1:], strict=False)
    ):
        out.append(
            '<p class="note">no solution was run twice in a row unchanged: run it again to see '
            "the noise band a change has to beat</p>"
        )
    rows = []
    for h in history_rows(runs):
        r = h.record
        cells = [
            _td(str(h.index), v=h.index),
            _td(_when(r.created), left=True, v=r.created),
            _td(r.run_id, left=True),
            _td(r.git.label(), left=True),
            _td((r.solution_hash or "?")[:8], left=True),
            _td(r.score_label + (" (best)" if h.is_best else ""),
                v=r.score if r.has_score else None),
        ]
        if by_contest:
            c = contest.get(r.run_id)
            cells.append(_td("-" if c is None else f"{c:.2f}x", v=c))
        cells += [
            _td(f"{r.passed}/{r.total}", v=r.passed),
            _td("; ".join(h.changes), left=True, wrap=True),
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = [("#", True), ("when (UTC)", False), ("run", False), ("commit", False),
            ("solution", False), ("score (vs reference)", True)]
    if by_contest:
        head.append(("contest score", True))
    head += [("passed", True), ("changed", False)]
    out.append(table(head, rows, cls="history"))
    return "\n".join(out)


def _when(created: str) -> str:
    """``2026-11-27T09:40:12+00:00`` as ``11-27 09:40`` (UTC): short enough for a tick label."""
    try:
        moment = datetime.fromisoformat(created)
    except (TypeError, ValueError):
        return created or "?"
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%m-%d %H:%M")


def _cross_check(rec: LedgerRecord, key: str) -> str:
    asked = bool(rec.config.get("cross_check"))
    if not rec.cross_check:
        if asked and rec.device != "cuda":
            return f'<h3>Timer cross-check</h3><p class="banner">{_e(NEEDS_GPU)}</p>'
        return ""
    rows = [CrossCheckRow.from_dict(d) for d in rec.cross_check]
    labels, ticks = _cross_check_labels(rows)
    out = ["<h3>Timer cross-check</h3>"]
    svg = plots.cross_check_svg(rows, ticks, f"{key}-xc")
    if svg:
        out.append(f'<figure class="plot" data-plot="cross-check">{svg}</figure>')
    body = []
    for r, label in zip(rows, labels, strict=True):
        ratios = r.ratios()
        cells = [
            _td(r.uuid[:8], left=True, title=r.uuid),
            _td(label, left=True, wrap=True),
            _td(str(r.kernels or "?")),
            _td(fmt_ms(r.busy_ms)),
        ]
        for m in METHODS:
            if m in r.latencies_ms:
                ratio = f" ({ratios[m]:.2f}x)" if m in ratios and m != r.reference else ""
                cells.append(_td(fmt_ms(r.latencies_ms[m]) + ratio))
            else:
                cells.append(_td("n/a", title=r.unavailable.get(m, "")))
        verdict = "DISAGREE: " + r.reason if r.flagged else "agree"
        if r.note:
            verdict += "; note: " + r.note
        cells.append(f'<td class="l wrap {"fail" if r.flagged else "pass"}">{_e(verdict)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    head = [("workload", False), ("axes", False), ("kernels", True), ("busy", True)]
    head += [(m, True) for m in METHODS] + [("verdict", False)]
    out.append(table(head, body, cls="cross-check"))
    out.append(f'<p class="note">{_e(MODEL_NOTE)}</p>')
    return "\n".join(out)


def _cross_check_labels(rows: Sequence[Any]) -> tuple[list[str], list[str]]:
    """Each cross-checked workload's shape for the table (the axes that vary between the rows)
    and a short tick label for the chart: the axis with the most values, numbered where
    several workloads share a value (``seq_len=7 #2``), else the uuid's start."""
    names = list(dict.fromkeys(k for r in rows for k in r.axes))
    varying = [k for k in names if len({r.axes.get(k) for r in rows}) > 1] or names
    labels = [", ".join(f"{k}={r.axes[k]}" for k in varying if k in r.axes) or r.uuid[:8]
              for r in rows]
    if not varying:
        return labels, [r.uuid[:8] for r in rows]
    axis = max(varying, key=lambda k: len({r.axes.get(k) for r in rows}))
    ticks, seen = [], Counter(r.axes.get(axis) for r in rows)
    count: Counter = Counter()
    for r in rows:
        value = r.axes.get(axis)
        count[value] += 1
        ticks.append(f"{axis}={value}" + (f" #{count[value]}" if seen[value] > 1 else ""))
    return labels, ticks


def _failures(rec: LedgerRecord) -> str:
    failed = [r for r in rec.results.rows if not r.passed]
    if not failed:
        return ""
    out = [f"<h3>Failures ({len(failed)})</h3>"]
    for r in failed:
        out.append(
            f'<p><span class="fail">{_e(r.status)}</span> {_e(r.short_uuid)} '
            f"({_e(r.axes_text())}): {_e(r.reason or 'no reason recorded')}</p>"
        )
        if r.log_tail:
            out.append(f"<pre>{_e(chr(10).join(r.log_tail))}</pre>")
    return "\n".join(out)


def _environment(rec: LedgerRecord) -> str:
    res = rec.results
    hardware = str(res.environment.get("hardware") or "")
    items: list[tuple[str, str]] = [
        ("device", res.device),
        ("GPU" if res.device == "cuda" else "hardware", _machine(res)),
    ]
    if hardware and res.gpu_name and hardware != res.gpu_name:
        items.append(("hardware (as the trace names it)", hardware))
    items += [
        ("mode", res.mode),
        (
            "commit",
            (rec.git.commit or "no git") + (" (uncommitted changes)" if rec.git.dirty else ""),
        ),
        ("branch", rec.git.branch or "-"),
    ]
    for what, values in (
        ("timing method used", {r.timing_method for r in res.rows}),
        ("clocks", {r.clocks for r in res.rows}),
        ("L2 cache", {r.l2_policy for r in res.rows}),
        ("roofline peak assumed", {r.floor_peak for r in res.rows}),
    ):
        known = sorted(v for v in values if v)
        if known:
            items.append((what, "; ".join(known)))
    libs = res.environment.get("libs") or {}
    items += [(f"lib: {k}", str(v)) for k, v in sorted(libs.items())]
    items += [(f"setting: {k}", str(v)) for k, v in _flat(rec.config)]
    rows = [f"<tr>{_td(k, left=True)}{_td(v, left=True)}</tr>" for k, v in items]
    return "<h3>Environment</h3>" + table([("what", False), ("value", False)], rows,
                                          cls="environment")


def _flat(d: dict, prefix: str = "") -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for k in sorted(d):
        v = d[k]
        if isinstance(v, dict):
            out += _flat(v, f"{prefix}{k}.")
        elif v is not None:
            out.append((f"{prefix}{k}", v))
    return out
