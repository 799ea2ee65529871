"""One self-contained HTML page of results: tables, inline SVG plots, no network access.

A page has one section per definition. Each section shows, for its run: the summary line;
latency, speedup and % of roofline per workload (plots with the p10-p90 spread as error bars,
and a table with every workload); the comparison with a previous run (both overlaid, the noise
band shaded, the verdict per workload); the score over the ledger's history; the timer
cross-check when the run had one; the failures with their reasons; and the environment.

Everything is escaped; the only markup from elsewhere is matplotlib's SVG. Without matplotlib
the page still has every table and says how to get the plots.

Example::

    from fib_core.report.html import ReportSection, build_html
    page = build_html([ReportSection(record, previous=older, history=records)])
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from fib_core.report import plots
from fib_core.report.compare import Delta, comparability_warning, compare
from fib_core.report.ledger import LedgerRecord
from fib_core.report.render import fmt_error, fmt_ms, fmt_speedup
from fib_core.report.summary import summarize

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1f2328;
max-width:1200px}
h1{font-size:22px}h2{font-size:19px;border-bottom:1px solid #d0d7de;padding-bottom:4px;
margin-top:36px}h3{font-size:15px;margin-top:22px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:right;vertical-align:top;
white-space:nowrap}td.wrap{white-space:normal}
th{background:#f6f8fa}td.l,th.l{text-align:left}
.pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:600}
.faster{color:#1a7f37}.slower{color:#cf222e}.note{color:#57606a;font-size:13px}
.banner{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;margin:8px 0}
.score{font-size:17px;font-weight:600}pre{background:#f6f8fa;padding:6px;font-size:12px;
overflow-x:auto;text-align:left}svg{max-width:100%;height:auto;display:block}
"""


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
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
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
    from fib_core.atomic import atomic_write_text

    same = [r for r in history if r.definition == record.definition]
    page = build_html([ReportSection(record, previous=previous, history=same)])
    path = Path(path)
    atomic_write_text(path, page)
    return path


def _section(sec: ReportSection, key: str) -> str:
    rec, res = sec.record, sec.record.results
    summary = summarize(res)
    out = [f'<section id="{key}"><h2>{_e(rec.definition)}</h2>']
    if not summary.has_score:  # no reference timing (a CPU smoke run): nothing to score
        why = "CPU smoke run: correctness only" if res.is_cpu_smoke else "the reference was not timed"
        score = f"No score ({why})"
    elif summary.all_passed:
        score = f"Score {summary.score:.2f}x (mean speedup over {summary.total} workloads)"
    else:
        score = f"Score 0 ({summary.failed} of {summary.total} workloads failed)"
    out.append(
        f'<p class="score">{_e(score)} · passed {summary.passed}/{summary.total}</p>'
        f'<p class="note">run {_e(rec.run_id)} · solution {_e(rec.solution_name or "?")} '
        f"({_e((rec.solution_hash or '?')[:12])}) · commit {_e(rec.git.label())} · "
        f"{_e(res.gpu_name or res.device)} · {_e(rec.created)}</p>"
    )
    if res.is_cpu_smoke:
        out.append(f'<p class="banner">{_e(res.mode)}</p>')
    deltas: dict[str, Delta] = {}
    if sec.previous is not None:
        deltas = {d.uuid: d for d in compare(res, sec.previous.results)}
    out.append("<h3>Per workload</h3>")
    for name, svg in (
        ("latency", plots.latency_svg(res, f"{key}-lat")),
        ("speedup", plots.speedup_svg(res, f"{key}-spd")),
        ("roofline", plots.roofline_svg(res, f"{key}-roof")),
    ):
        if svg:
            out.append(f'<figure class="plot" data-plot="{name}">{svg}</figure>')
    out.append(_workload_table(rec, deltas))
    if sec.previous is not None:
        out.append(_comparison(sec, deltas, key))
    out.append(_history(sec, key))
    out.append(_cross_check(rec, key))
    out.append(_failures(rec))
    out.append(_environment(rec))
    out.append("</section>")
    return "\n".join(p for p in out if p)


def _workload_table(rec: LedgerRecord, deltas: dict[str, Delta]) -> str:
    res = rec.results
    head = [
        "workload",
        "axes",
        "status",
        "latency",
        "p10-p90",
        "reference",
        "speedup",
        "% roofline",
        "achieved",
        "max abs err",
    ]
    if deltas:
        head += ["previous", "change", "noise", "verdict"]
    rows = []
    for r in res.rows:
        band = (
            f"{fmt_ms(r.spread.p10_ms)} - {fmt_ms(r.spread.p90_ms)}"
            if r.spread and r.spread.p10_ms is not None and r.spread.p90_ms is not None
            else "-"
        )
        cells = [
            _td(r.short_uuid, left=True, title=r.uuid),
            _td(r.axes_text(), left=True),
            f'<td class="l {"pass" if r.passed else "fail"}">{_e(r.status)}</td>',
            _td(fmt_ms(r.latency_ms)),
            _td(band),
            _td(fmt_ms(r.reference_latency_ms)),
            _td(fmt_speedup(r.speedup)),
            _td("-" if r.roofline_fraction is None else f"{100 * r.roofline_fraction:.1f}%"),
            _td(str(r.achieved) if r.achieved else "-"),
            _td(fmt_error(r.max_abs_error)),
        ]
        if deltas:
            cells += _delta_cells(deltas.get(r.uuid))
        rows.append(f'<tr data-uuid="{_e(r.uuid)}">' + "".join(cells) + "</tr>")
    return _table(head, rows, cls="workloads")


def _delta_cells(d: Delta | None) -> list[str]:
    if d is None:
        return [_td("-")] * 4
    change = "-" if d.change_pct is None else f"{d.change_pct:+.1f}%"
    noise = "-" if d.noise_pct is None else f"±{d.noise_pct:.1f}%"
    cls = {"faster": "faster", "slower": "slower"}.get(d.verdict, "")
    return [
        _td(fmt_ms(d.previous_ms)),
        _td(change),
        _td(noise),
        f'<td class="l {cls}">{_e(d.verdict)}</td>',
    ]


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
        f"{_e(prev.git.label())}, score {prev.score_label}) → this run: score "
        f"{sec.record.score_label}; "
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
    from fib_core.report.history import history_rows

    points = [  # a CPU smoke run has no score to plot
        (f"#{i} {r.git.label()}", r.score, r.passed == r.total and r.total > 0)
        for i, r in enumerate(runs, start=1) if r.has_score
    ]
    out = ["<h3>History</h3>"]
    svg = plots.history_svg(points, f"{key}-hist")
    if svg:
        out.append(f'<figure class="plot" data-plot="history">{svg}</figure>')
    rows = []
    for h in history_rows(runs):
        r = h.record
        rows.append(
            "<tr>"
            + _td(str(h.index))
            + _td(r.run_id, left=True)
            + _td(r.git.label(), left=True)
            + _td((r.solution_hash or "?")[:8], left=True)
            + _td(r.score_label + (" (best)" if h.is_best else ""))
            + _td(f"{r.passed}/{r.total}")
            + _td("; ".join(h.changes), left=True, wrap=True)
            + "</tr>"
        )
    out.append(
        _table(
            ["#", "run", "commit", "solution", "score", "passed", "changed"], rows, cls="history"
        )
    )
    return "\n".join(out)


def _cross_check(rec: LedgerRecord, key: str) -> str:
    from fib_core.bench.cross_check import METHODS, MODEL_NOTE, NEEDS_GPU, CrossCheckRow

    asked = bool(rec.config.get("cross_check"))
    if not rec.cross_check:
        if asked and rec.device != "cuda":
            return f'<h3>Timer cross-check</h3><p class="banner">{_e(NEEDS_GPU)}</p>'
        return ""
    rows = [CrossCheckRow.from_dict(d) for d in rec.cross_check]
    labels = [", ".join(f"{k}={v}" for k, v in r.axes.items()) or r.uuid[:8] for r in rows]
    out = ["<h3>Timer cross-check</h3>"]
    svg = plots.cross_check_svg(rows, labels, f"{key}-xc")
    if svg:
        out.append(f'<figure class="plot" data-plot="cross-check">{svg}</figure>')
    body = []
    for r, label in zip(rows, labels, strict=True):
        ratios = r.ratios()
        cells = [
            _td(r.uuid[:8], left=True, title=r.uuid),
            _td(label, left=True),
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
    out.append(
        _table(
            ["workload", "axes", "kernels", "busy", *METHODS, "verdict"], body, cls="cross-check"
        )
    )
    out.append(f'<p class="note">{_e(MODEL_NOTE)}</p>')
    return "\n".join(out)


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
    items: list[tuple[str, str]] = [
        ("device", res.device),
        ("GPU", res.gpu_name or "-"),
        ("hardware", str(res.environment.get("hardware", "-"))),
        ("mode", res.mode),
        (
            "commit",
            (rec.git.commit or "no git") + (" (uncommitted changes)" if rec.git.dirty else ""),
        ),
        ("branch", rec.git.branch or "-"),
    ]
    libs = res.environment.get("libs") or {}
    items += [(f"lib: {k}", str(v)) for k, v in sorted(libs.items())]
    items += [(f"setting: {k}", str(v)) for k, v in _flat(rec.config)]
    rows = [f"<tr>{_td(k, left=True)}{_td(v, left=True)}</tr>" for k, v in items]
    return "<h3>Environment</h3>" + _table(["what", "value"], rows, cls="environment")


def _flat(d: dict, prefix: str = "") -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for k in sorted(d):
        v = d[k]
        if isinstance(v, dict):
            out += _flat(v, f"{prefix}{k}.")
        elif v is not None:
            out.append((f"{prefix}{k}", v))
    return out


def _table(head: list[str], rows: list[str], *, cls: str) -> str:
    th = "".join(f'<th class="l">{_e(h)}</th>' for h in head)
    return (
        f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _td(text: str, *, left: bool = False, title: str | None = None, wrap: bool = False) -> str:
    classes = " ".join(c for c, on in (("l", left), ("wrap", wrap)) if on)
    attrs = f' class="{classes}"' if classes else ""
    if title:
        attrs += f' title="{_e(title)}"'
    return f"<td{attrs}>{_e(text)}</td>"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)
