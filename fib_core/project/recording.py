"""What a local run keeps after its table: the ledger record, the HTML report, the comparison.

``run_local.py`` builds a :class:`RunRecording` before benchmarking (so a wrong ``--compare``
reference fails before the GPU time is spent) and :func:`fib_core.project.run_finish.finish` calls
:meth:`RunRecording.previous` before printing the table and :meth:`RunRecording.keep` after it.

Example::

    rec = RunRecording.for_run(ws.cfg.root, solution, request, compare_ref="best")
    rec.check(ws.definition.name)
    opts = RunOptions(recording=rec)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fib_core.report.html import write_report
from fib_core.report.ledger import (
    LEDGER_RELPATH,
    LedgerRecord,
    append_record,
    load_ledger,
    new_record,
    select_run,
)

if TYPE_CHECKING:
    from fib_core.data import Solution
    from fib_core.report.results import RunResults


@dataclass
class RunRecording:
    """Where this run is recorded and what it is compared with.

    ``ledger_path`` None: no ledger record (``--no-ledger``). ``compare_ref``: ``last``,
    ``best`` or a commit / run-id prefix looked up in the ledger. ``html_path``: also write
    the HTML report there.
    """

    root: Path
    solution_name: str | None
    solution_hash: str | None
    config: dict[str, Any]
    ledger_path: Path | None = None
    compare_ref: str | None = None
    html_path: Path | None = None
    compared_with: LedgerRecord | None = field(default=None, init=False)
    recorded: LedgerRecord | None = field(default=None, init=False)

    @classmethod
    def for_run(
        cls,
        root: str | Path,
        solution: Solution,
        request: Any,
        *,
        ledger: bool = True,
        compare_ref: str | None = None,
        html_path: Path | None = None,
    ) -> RunRecording:
        """The recording of ``request`` (a :class:`~fib_core.bench.engine.shard_run.RunRequest`)."""
        root = Path(root)
        return cls(
            root=root,
            solution_name=solution.name,
            solution_hash=solution.hash(),
            config=run_config(request),
            ledger_path=root / LEDGER_RELPATH if ledger else None,
            compare_ref=compare_ref,
            html_path=html_path,
        )

    @property
    def ledger_file(self) -> Path:
        return self.ledger_path if self.ledger_path is not None else self.root / LEDGER_RELPATH

    def check(self, definition: str) -> None:
        """Fail now (LedgerError) if the ledger is unreadable or ``compare_ref`` matches nothing."""
        records = load_ledger(self.ledger_file)
        if self.compare_ref is not None:
            select_run(records, self.compare_ref, definition=definition, source=self.ledger_file)

    def previous(self, results: RunResults) -> RunResults | None:
        """The run to compare ``results`` with, preferring runs on the same kind of device."""
        if self.compare_ref is None:
            return None
        records = load_ledger(self.ledger_file)
        same_device = [r for r in records if r.device == results.device]
        pool = (
            same_device if any(r.definition == results.definition for r in same_device) else records
        )
        self.compared_with = select_run(
            pool, self.compare_ref, definition=results.definition, source=self.ledger_file
        )
        return self.compared_with.results

    def keep(
        self, results: RunResults, console: Any, cross_check: list[dict[str, Any]] | None = None
    ) -> list[str]:
        """Append the ledger record and write the HTML report; say where each went.

        Returns one line per write that failed (an unwritable folder, a full disk): the run's
        figures are printed already, so a failed write is reported, not raised.
        """
        problems: list[str] = []
        if self.compared_with is not None:
            c = self.compared_with
            console.print(
                f"compared with run {c.run_id} (commit {c.git.label()}, score {c.score_label})",
                highlight=False,
            )
        history = load_ledger(self.ledger_file) if self.html_path is not None else []
        record = new_record(
            results,
            root=self.root,
            solution_name=self.solution_name,
            solution_hash=self.solution_hash,
            config=self.config,
            cross_check=cross_check,
        )
        if self.ledger_path is not None:
            try:
                append_record(self.ledger_path, record)
            except OSError as err:
                problems.append(
                    f"{self.ledger_path}: cannot record the run ({err.strerror or err}); "
                    "it is not in the ledger"
                )
            else:
                self.recorded = record
                console.print(
                    f"run {record.run_id} recorded in {self.ledger_path}", highlight=False
                )
        if self.html_path is not None:
            try:
                write_report(
                    self.html_path, record, history=[*history, record], previous=self.compared_with
                )
            except OSError as err:
                problems.append(
                    f"{self.html_path}: cannot write the HTML report ({err.strerror or err}); "
                    "pass --html PATH in a writable folder"
                )
            else:
                console.print(f"HTML report written to {self.html_path}", highlight=False)
        return problems


def run_config(request: Any) -> dict[str, Any]:
    """The settings of a run request that decide what was measured."""
    return {
        "engine": dict(request.engine),
        "filters": list(request.filters) if request.filters else None,
        "quick": request.uses_quick_subset(request.device),
        "build": dict(request.build),
        "device": request.device,
        "cross_check": bool(getattr(request, "cross_check", False)),
    }
