"""The timer cross-check's table, as ``run_local.py --cross-check`` prints it.

The measuring is :mod:`fib_core.bench.cross_check`'s (in the engine's package, beside the
timers it compares); printing it needs the report's number formats, which the engine does not
import, so the table lives with the run's other printing in the project.

Example::

    print_cross_check(rows, notes, Console())
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from fib_core.bench.cross_check import METHODS, MODEL_NOTE, CrossCheckRow
from fib_core.report.render import fmt_ms


def print_cross_check(rows: list[dict[str, Any]], notes: list[str], console: Any) -> None:
    """The cross-check table: latency per method, ratio to the span, and the verdict."""
    for note in notes:
        console.print(f"[yellow]{escape(note)}[/yellow]", highlight=False)
    if not rows:
        return
    parsed = [CrossCheckRow.from_dict(r) for r in rows]
    table = Table(title="Timer cross-check (median per call; ratio to the device span)")
    table.add_column("workload")
    table.add_column("kernels", justify="right")
    for m in METHODS:
        table.add_column(m, justify="right")
    table.add_column("verdict")
    for row in parsed:
        ratios = row.ratios()
        cells = []
        for m in METHODS:
            if m in row.latencies_ms:
                ratio = f" ({ratios[m]:.2f}x)" if m in ratios and m != row.reference else ""
                cells.append(fmt_ms(row.latencies_ms[m]) + ratio)
            else:
                cells.append("n/a")
        verdict = "[red]DISAGREE[/red]" if row.flagged else "[green]agree[/green]"
        table.add_row(row.uuid[:8], str(row.kernels or "?"), *cells, verdict)
    console.print(table, highlight=False)
    for row in parsed:
        if row.flagged:
            console.print(f"  {row.uuid[:8]}: {escape(row.reason)}", highlight=False)
        if row.note:
            console.print(f"  {row.uuid[:8]}: note: {escape(row.note)}", highlight=False)
    missing = {m: why for row in parsed for m, why in row.unavailable.items()}
    for m, why in missing.items():
        console.print(f"  {m}: {escape(why)}", highlight=False)
    console.print(escape(MODEL_NOTE), highlight=False)
