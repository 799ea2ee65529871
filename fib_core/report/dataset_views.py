"""``report summary`` and ``report best``: views over every trace stored in a dataset folder.

A dataset's traces file grows with each run (traces are appended). Both views take, for each
(solution, workload) pair, its newest trace only, so a fixed bug does not keep counting against
a solution; that is the same rule as :meth:`RunResults.from_traces`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fib_core.report.formats import fmt_ms, fmt_speedup
from fib_core.report.render import readable_width
from fib_core.report.results import RunResults, results_by_solution
from fib_core.report.summary import Summary, summarize
from fib_core.report.workload_result import WorkloadResult


@dataclass(frozen=True)
class SolutionStanding:
    """One solution's newest results on one definition and their contest summary."""

    results: RunResults
    summary: Summary
    not_run: int = 0  # workloads of the definition this solution has no trace for


@dataclass(frozen=True)
class BestEntry:
    """The fastest passing solution of one workload."""

    definition: str
    row: WorkloadResult
    solution: str | None


def standings(trace_set: Any) -> list[SolutionStanding]:
    """Every (definition, solution) with traces, by definition then contest score (best first)."""
    authors = {s.name: s.author for sols in trace_set.solutions.values() for s in sols if s.author}
    runs = results_by_solution(_all_traces(trace_set), authors=authors)
    out = [SolutionStanding(r, summarize(r), _not_run(trace_set, r)) for r in runs]
    out.sort(key=lambda s: (s.results.definition, -s.summary.score, str(s.results.solution)))
    return out


def best_per_workload(found: Iterable[SolutionStanding]) -> list[BestEntry]:
    """Per (definition, workload), the passing row with the highest speedup (lowest latency on ties)."""
    best: dict[tuple[str, str], BestEntry] = {}
    for st in found:
        for row in st.results.rows:
            if not row.passed or row.latency_ms is None:
                continue
            key = (st.results.definition, row.uuid)
            held = best.get(key)
            if held is None or _better(row, held.row):
                best[key] = BestEntry(st.results.definition, row, st.results.solution)
    return sorted(best.values(), key=lambda e: (e.definition, sorted(e.row.axes.items())))


def render_standings(found: list[SolutionStanding], console: Console) -> None:
    table = _table(
        console,
        "definition",
        "solution",
        "author",
        "device",
        "passed",
        "score",
        "mean speedup (passing)",
        "not run",
        "slowest",
    )
    for st in found:
        s, r = st.summary, st.results
        slowest = f"{s.slowest[0][0][:8]} {fmt_ms(s.slowest[0][1])}" if s.slowest else "-"
        if not s.has_score:  # the reference was not timed (a CPU smoke run): no score
            score = mean = "-"
        else:
            score = fmt_speedup(s.score) if s.all_passed else "0"
            mean = fmt_speedup(s.mean_speedup_passed)
        table.add_row(
            escape(r.definition),
            escape(r.solution or "-"),
            escape(r.author or "-"),
            escape(r.gpu_name or r.device),
            f"{s.passed}/{s.total}",
            score,
            mean,
            str(st.not_run),
            slowest,
        )
    with readable_width(console):
        console.print(table)
    if any(st.results.is_cpu_smoke for st in found):
        console.print(
            "[yellow]rows measured on cpu are smoke runs: correctness only, no score, "
            "timings not comparable[/]"
        )


def render_best(entries: list[BestEntry], console: Console) -> None:
    table = _table(console, "definition", "workload", "axes", "best solution", "latency", "speedup")
    for e in entries:
        table.add_row(
            escape(e.definition),
            e.row.short_uuid,
            escape(e.row.axes_text()),
            escape(e.solution or "-"),
            fmt_ms(e.row.latency_ms),
            fmt_speedup(e.row.speedup),
        )
    with readable_width(console):
        console.print(table)


def _table(console: Console, *columns: str) -> Table:
    table = Table(box=box.ASCII if not console.is_terminal else box.SIMPLE_HEAD, highlight=False)
    for name in columns:
        table.add_column(name, overflow="fold")
    return table


def _better(row: WorkloadResult, held: WorkloadResult) -> bool:
    a = row.speedup if row.speedup is not None else -1.0
    b = held.speedup if held.speedup is not None else -1.0
    if a != b:
        return a > b
    return (row.latency_ms or float("inf")) < (held.latency_ms or float("inf"))


def _not_run(trace_set: Any, results: RunResults) -> int:
    measured = {r.uuid for r in results.rows}
    workloads = trace_set.workloads.get(results.definition, [])
    return sum(1 for w in workloads if w.workload.uuid not in measured)


def _all_traces(trace_set: Any) -> list[Any]:
    return [t for traces in trace_set.traces.values() for t in traces]
