"""The ledger as a list of runs: score, pass count and what changed since the run before.

"What changed" compares each run with the previous run *of the same definition*: the
solution's content hash, the fork's commit (or its dirty flag), any setting of the run
(iterations, workload filters, build flags...), and the machine.

Example::

    from fib_core.report.history import history_rows
    for row in history_rows(load_ledger("runs/ledger.jsonl")):
        print(row.record.run_id, row.record.score, row.changes)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.markup import escape
from rich.table import Table

from fib_core.report.ledger import LedgerRecord, describe_changes
from fib_core.report.render import readable_width


@dataclass(frozen=True)
class HistoryRow:
    """One run and what differs from the previous run of its definition."""

    index: int  # 1-based position in the ledger
    record: LedgerRecord
    changes: list[str]
    is_best: bool = False


def history_rows(records: list[LedgerRecord], definition: str | None = None) -> list[HistoryRow]:
    """Rows oldest first; ``definition`` keeps only that definition's runs.

    ``is_best`` marks the highest-scoring run of each (definition, device kind) pair; a CPU
    smoke run has no score (its reference is not timed), so it is never the best.
    """
    last: dict[str, LedgerRecord] = {}
    best: dict[tuple[str, str], tuple[float, int]] = {}
    rows = []
    for i, rec in enumerate(records, start=1):
        changes = describe_changes(last.get(rec.definition), rec)
        last[rec.definition] = rec
        if definition is not None and rec.definition != definition:
            continue
        key = (rec.definition, rec.device)
        if rec.total and rec.has_score and (key not in best or rec.score >= best[key][0]):
            best[key] = (rec.score, i)
        rows.append(HistoryRow(i, rec, changes))
    best_index = {i for _, i in best.values()}
    return [HistoryRow(r.index, r.record, r.changes, r.index in best_index) for r in rows]


def render_history(rows: list[HistoryRow], console: Any, source: str = "runs/ledger.jsonl") -> None:
    """Print the history table (one line per run, newest last)."""
    several = len({r.record.definition for r in rows}) > 1
    table = Table(title=f"Run history ({escape(str(source))})")
    table.add_column("#", justify="right")
    table.add_column("run")
    if several:
        table.add_column("definition")
    table.add_column("commit")
    table.add_column("solution")
    table.add_column("device")
    table.add_column("score", justify="right")
    table.add_column("passed", justify="right")
    table.add_column("changed")
    for row in rows:
        rec = row.record
        score = rec.score_label + (" *" if row.is_best else "")
        cells = [str(row.index), rec.run_id]
        if several:
            cells.append(rec.definition)
        cells += [
            rec.git.label(),
            (rec.solution_hash or "?")[:8],
            rec.results.gpu_name or rec.device,
            score,
            f"{rec.passed}/{rec.total}",
            escape("; ".join(row.changes)),
        ]
        table.add_row(*cells)
    with readable_width(console):
        console.print(table, highlight=False)
        console.print("* best score of its definition on that device", highlight=False)
