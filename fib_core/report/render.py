"""What a contestant reads after a run: the results table, the failures, the summary.

Output goes through a ``rich`` console. On a terminal it uses colour and box lines; when stdout
is a file or a CI log it falls back to ASCII boxes, no colour, and a width wide enough for the
table (an 80-column default would fold every cell), so the log stays readable as plain text.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from fib_core.data.trace import EvaluationStatus
from fib_core.report.attribution import blames_reference
from fib_core.report.baseline import contest_details
from fib_core.report.compare import ONE_SAMPLE, Delta, comparability_warning
from fib_core.report.compare import compare as compare_runs
from fib_core.report.formats import fmt_error, fmt_ms, fmt_ms_range, fmt_speedup
from fib_core.report.headline import headline
from fib_core.report.progress import progress_bar
from fib_core.report.results import RunResults
from fib_core.report.shapes import by_shape
from fib_core.report.summary import Summary, summarize
from fib_core.report.table_fit import dropped_note, fit_columns
from fib_core.report.workload_result import WorkloadResult

LOG_WIDTH = 160
MAX_NOTES = 5
_STATUS_STYLE = {EvaluationStatus.PASSED: "green", EvaluationStatus.TIMEOUT: "yellow"}

__all__ = [
    "progress_bar",
    "readable_width",
    "render_results",
]


def render_results(
    results: RunResults,
    console: Console,
    *,
    compare: RunResults | Sequence[Delta] | None = None,
    scope: str | None = None,
    wide: bool = False,
) -> Summary:
    """Print table, failures and summary of ``results``; returns the :class:`Summary` shown.

    ``compare`` is a previous run (or deltas already computed with
    :func:`fib_core.report.compare.compare`); it adds a change column and a short verdict count.
    ``scope`` says which workloads ran (e.g. "3 of 54 workloads (quick subset)"); ``wide``
    keeps every column even when the table is wider than the console.
    """
    deltas, warning = _deltas(results, compare)
    summary = summarize(results)
    with readable_width(console):
        _print_header(results, console)
        table, hidden = _results_table(results, deltas, console, wide=wide)
        _say(console, table)
        if hidden:
            _say(console, f"[dim]{escape(hidden)}[/dim]")
        _print_shapes(results, console, wide=wide)
        _print_notes(results, console)
        _print_failures(results, console)
        _print_summary(results, summary, console, scope)
        if deltas is not None:
            _print_compare(deltas, warning, console)
    return summary


def _deltas(
    results: RunResults, compare: RunResults | Sequence[Delta] | None
) -> tuple[list[Delta] | None, str | None]:
    if compare is None:
        return None, None
    if isinstance(compare, RunResults):
        return compare_runs(results, compare), comparability_warning(results, compare)
    return list(compare), None


@contextlib.contextmanager
def readable_width(console: Console) -> Iterator[None]:
    """Widen a non-terminal console for the duration of a report, then restore it."""
    if console.is_terminal or console.width >= LOG_WIDTH:
        yield
        return
    saved = console._width  # rich keeps the explicit width here; None means "detect"
    console.width = LOG_WIDTH
    try:
        yield
    finally:
        console._width = saved


def _print_header(results: RunResults, console: Console) -> None:
    who = escape(results.solution or "(no solution)")
    if results.author:
        who += f" by {escape(results.author)}"
    where = escape(results.gpu_name or results.device)
    _say(console, f"[bold]{escape(results.definition)}[/bold]  {who}  on {where}")
    if results.is_cpu_smoke:
        _say(console, _cpu_banner(results.mode, console))


def _cpu_banner(mode: str, console: Console) -> Panel:
    return Panel(
        f"[bold yellow]{escape(mode)}[/bold yellow]",
        box=box.ASCII if not console.is_terminal else box.HEAVY,
        expand=False,
    )


def _results_table(
    results: RunResults, deltas: list[Delta] | None, console: Console, *, wide: bool = False
) -> tuple[Table, str | None]:
    """The table, and a line naming the columns dropped to fit the console (None if none)."""
    by_uuid = {d.uuid: d for d in deltas or []}
    columns: dict[str, list[str]] = {
        name: []
        for name in (
            "workload",
            "axes",
            "status",
            "latency",
            "busy",
            "ref",
            "speedup",
            "abs err",
            "rel err",
            "roofline",
        )
    }
    if deltas is not None:
        columns["vs prev"] = []
    for row in results.rows:
        cells = [
            row.short_uuid,
            escape(row.axes_text()),
            _status_cell(row),
            fmt_ms(row.latency_ms),
            fmt_ms(row.busy_ms) if row.busy_ms is not None else "-",
            fmt_ms(row.reference_latency_ms),
            fmt_speedup(row.speedup),
            fmt_error(row.max_abs_error),
            fmt_error(row.max_rel_error),
            _roofline_cell(row),
        ]
        if deltas is not None:
            delta = by_uuid.get(row.uuid)
            cells.append(fmt_delta(delta) if delta else "")
        for name, cell in zip(columns, cells, strict=True):
            columns[name].append(cell)
    kept = fit_columns(columns, console.width, wide=wide)
    table = Table(
        box=box.ASCII if not console.is_terminal else box.SIMPLE_HEAD,
        expand=False,
        highlight=False,
    )
    for name in kept:
        if name == "axes":
            table.add_column(name, overflow="fold")
        elif name in ("workload", "status"):
            table.add_column(name, no_wrap=True)
        else:
            table.add_column(name, justify="right", no_wrap=True)
    for i in range(len(results.rows)):
        table.add_row(*(columns[name][i] for name in kept))
    return table, dropped_note(list(columns), kept, console.width)


SHAPE_DROP_ORDER = ("ref spread", "floor", "reference", "spread", "baseline", "roofline")


def _print_shapes(results: RunResults, console: Console, *, wide: bool = False) -> None:
    """One line per shape (median over its workloads, lowest-highest beside), when some shape
    has several workloads: 54 rows of ten batch sizes read as ten lines."""
    shapes = by_shape(results)
    if not shapes or all(s.workloads == 1 for s in shapes):
        return
    base = any(s.baseline for s in shapes)
    columns: dict[str, list[str]] = {
        name: [] for name in ("shape", "n", "passed", "latency", "spread", "floor", "roofline")
    }
    if base:
        columns["baseline"], columns["vs baseline"] = [], []
    columns["reference"], columns["ref spread"], columns["vs ref"] = [], [], []
    for s in shapes:
        k = s.kernel
        cells = {
            "shape": escape(s.label),
            "n": str(s.workloads),
            "passed": f"{s.passed}/{s.workloads}",
            "latency": fmt_ms(k.median) if k else "-",
            "spread": fmt_ms_range(k.low, k.high) if k else "-",
            "floor": fmt_ms(s.floor.median) if s.floor else "-",
            "roofline": f"{100 * s.roofline.median:.0f}%" if s.roofline else "-",
            "baseline": fmt_ms(s.baseline.median) if s.baseline else "-",
            "vs baseline": fmt_speedup(s.baseline_speedup.median) if s.baseline_speedup else "-",
            "reference": fmt_ms(s.reference.median) if s.reference else "-",
            "ref spread": (f"{s.reference.ratio:.2f}x" if s.reference and s.reference.n > 1
                           else "-"),
            "vs ref": fmt_speedup(s.speedup.median) if s.speedup else "-",
        }
        for name in columns:
            columns[name].append(cells[name])
    always = ("shape", "n", "passed", "latency")  # the rest only where some shape has a figure
    columns = {k: v for k, v in columns.items() if k in always or any(c != "-" for c in v)}
    kept = fit_columns(columns, console.width, wide=wide, drop_order=SHAPE_DROP_ORDER)
    table = Table(
        title="Per shape (medians over its passing workloads)",
        box=box.ASCII if not console.is_terminal else box.SIMPLE_HEAD,
        expand=False,
        highlight=False,
    )
    for name in kept:
        left = name == "shape"
        table.add_column(name, justify="left" if left else "right", no_wrap=True)
    for i in range(len(shapes)):
        table.add_row(*(columns[name][i] for name in kept))
    _say(console)
    _say(console, table)
    hidden = dropped_note(list(columns), kept, console.width)
    if hidden:
        _say(console, f"[dim]{escape(hidden)}[/dim]")


def _status_cell(row: WorkloadResult) -> str:
    style = _STATUS_STYLE.get(row.status, "red")
    whose = " (reference)" if blames_reference(row.reason) else ""
    return f"[{style}]{row.status}{whose}[/{style}]"


def _roofline_cell(row: WorkloadResult) -> str:
    if row.roofline_fraction is None:
        return "-"
    text = f"{row.roofline_fraction * 100:.0f}%"
    return f"{text} ({row.achieved})" if row.achieved else text


def _print_notes(results: RunResults, console: Console) -> None:
    """Timing method(s) used and each distinct engine warning, with how many workloads had it."""
    methods = sorted({r.timing_method for r in results.rows if r.timing_method})
    if methods:
        _say(console, f"timing: {escape(', '.join(methods))}")
    counts: dict[str, int] = {}
    for row in results.rows:
        for w in row.warnings:
            counts[w] = counts.get(w, 0) + 1
    shown = list(counts.items())[:MAX_NOTES]
    for text, n in shown:
        _say(
            console, f"[yellow]note:[/yellow] {escape(text)} ({n} of {len(results.rows)} workloads)"
        )
    if len(counts) > len(shown):
        _say(console, f"[yellow]note:[/yellow] ... and {len(counts) - len(shown)} more warnings")


def _print_failures(results: RunResults, console: Console) -> None:
    failed = [r for r in results.rows if not r.passed]
    if not failed:
        return
    _say(console)
    _say(console, f"[bold red]Failures ({len(failed)})[/bold red]")
    for row in failed:
        reason, tail = _reason_and_tail(row)
        # soft_wrap: one line each, wrapped by the terminal (never inside a token by rich, at
        # a width of its own), so a log file holds each reason whole.
        _say(
            console,
            f"  {row.short_uuid} ({escape(row.axes_text())}) [red]{row.status}[/red]: "
            f"{escape(reason)}",
            soft_wrap=True,
        )
        for line in tail:
            _say(console, f"      | {escape(line)}", soft_wrap=True)


def _reason_and_tail(row: WorkloadResult) -> tuple[str, list[str]]:
    """The reason and the log tail without the line the reason quotes, so each is printed
    once; a reason shortened from a tail line ("...") is shown as that whole line."""
    reason = " ".join(row.reason.split())
    stem = reason.removesuffix("...").rstrip()
    tail: list[str] = []
    for line in row.log_tail:
        flat = " ".join(line.split())
        if flat == reason or (stem and stem != reason and flat.startswith(stem)):
            reason = flat
            continue
        tail.append(line)
    return reason, tail


def _print_passed_notes(results: RunResults, console: Console) -> None:
    """Why a PASSED row may show a large relative error: the metric that decided it."""
    for row in results.rows:
        if row.passed and row.decided_by:
            _say(
                console,
                f"[yellow]note:[/yellow] {row.short_uuid} passed with rel err "
                f"{fmt_error(row.max_rel_error)}: {escape(row.decided_by)}",
                overflow="fold",
            )


def _print_summary(
    results: RunResults, summary: Summary, console: Console, scope: str | None = None
) -> None:
    _print_passed_notes(results, console)
    _say(console)
    if scope:
        _say(console, f"Ran {escape(scope)}")
    if results.is_cpu_smoke:
        style = "green" if summary.all_passed else "red"
        _say(console, f"Passed: [{style}]{summary.passed}/{summary.total}[/{style}]")
        _say(
            console,
            "No score: a CPU smoke run checks correctness only (the contest scores GPU "
            "timings); run on a GPU, or on Modal, for the score",
        )
        _say(console, f"[bold yellow]{escape(results.mode)}[/bold yellow]")
        return
    # The contest score (over the FlashInfer baseline) gets its own line from the run right
    # after this summary (fib_core.baselines.contest); here, the speedup over the reference.
    head = headline(results)
    scored_elsewhere = bool(contest_details(results))
    if summary.total == 0:
        _say(console, "[bold]Score: 0[/bold] (no workload was measured)")
    elif not summary.has_score:
        _say(console, "No score: the reference was not timed (speedups need it)")
    elif summary.all_passed:
        _say(
            console,
            f"[bold]Score: {fmt_speedup(summary.score)}[/bold] "
            f"(mean speedup over the reference, {_plural(summary.total, 'workload')}"
            + (")" if scored_elsewhere else "; not the contest score, which is over the "
               "FlashInfer baseline)"),
        )
    else:
        mean = fmt_speedup(summary.mean_speedup_passed)
        _say(
            console,
            f"[bold]Score: 0[/bold] ({summary.failed} of {summary.total} workloads failed; "
            f"the contest scores a solution with any failure 0; mean speedup of the passing "
            f"ones: {mean})",
        )
    for detail in head.details:
        if detail.startswith("the reference itself"):
            _say(console, f"  {escape(detail)}", overflow="fold")
    style = "green" if summary.all_passed else "red"
    _say(console, f"Passed: [{style}]{summary.passed}/{summary.total}[/{style}]")
    if summary.slowest:
        axes = {r.uuid: r.axes_text() for r in results.rows}
        slow = ", ".join(
            f"{uuid[:8]} ({escape(axes.get(uuid, ''))}) {fmt_ms(ms)}"
            for uuid, ms in summary.slowest
        )
        _say(console, f"Slowest: {slow}")
    if results.is_cpu_smoke:
        _say(console, f"[bold yellow]{escape(results.mode)}[/bold yellow]")


def _print_compare(deltas: list[Delta], warning: str | None, console: Console) -> None:
    if warning:
        _say(console, f"[yellow]warning: {escape(warning)}[/yellow]")
    counts: dict[str, int] = {}
    for d in deltas:
        counts[d.verdict] = counts.get(d.verdict, 0) + 1
    parts = [f"{n} {verdict}" for verdict, n in counts.items()]
    _say(
        console, "Compared with previous: " + (", ".join(parts) if parts else "nothing to compare")
    )
    for d in deltas:
        if d.verdict == "missing":
            _say(console, f"  {d.uuid[:8]} was in the previous run but not in this one")


def fmt_delta(d: Delta) -> str:
    if d.change_pct is None:
        return d.verdict
    text = f"{d.change_pct:+.1f}%"
    if d.verdict == ONE_SAMPLE:
        return f"{text} (1 sample)"
    if not d.outside_noise:
        return f"{text} (noise)"
    style = "green" if d.change_pct < 0 else "red"
    return f"[{style}]{text}[/{style}]"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _say(console: Console, *objects: Any, **kwargs: Any) -> None:
    """Print without rich's number/keyword highlighting, which would colour random digits."""
    console.print(*objects, highlight=False, **kwargs)
