"""Live progress of a benchmark run, fed by the engine's ``on_event`` callback.

Kept apart from the results rendering: it only counts events. On a terminal it draws a rich
progress bar; in a CI log (stdout not a terminal) it prints one plain line per finished workload
instead, because a redrawn bar in a file is either nothing or a wall of control characters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from fib_core.data.trace import EvaluationStatus


@contextlib.contextmanager
def progress_bar(
    total: int | None = None, console: Console | None = None
) -> Iterator[Callable[[Any], None]]:
    """Live progress for a run; yields the ``on_event`` callback to hand to the engine.

    ``total`` is the number of (solution, workload) pairs; None means "learn it from the run":
    each ``SolutionStarted`` event (a ``total`` without a ``trace``) adds its count. Reads the
    engine's events by their fields: an event carrying an evaluated ``trace``
    (``WorkloadFinished``) counts one workload done; a ``WorkloadSkipped`` (``--resume``) counts
    one skipped; a ``message`` with a ``level`` of warning or error (``Log``) is printed.
    Anything else is ignored. Off a terminal, one plain line per finished workload is printed
    instead of a redrawn bar, so CI logs show the run's course.
    """
    if isinstance(total, Console):  # progress_bar(console): total left to the events
        total, console = None, total
    console = console if console is not None else Console()
    tally = _Tally(total)
    if not console.is_terminal:

        def log_event(event: Any) -> None:
            line = tally.consume(event)
            if line:
                _say(console, escape(line), soft_wrap=True)

        yield log_event
        return

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[green]{task.fields[passed]} passed[/green]"),
        TextColumn("[red]{task.fields[failed]} failed[/red]"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    with progress:
        task = progress.add_task("running", total=total or None, passed=0, failed=0)

        def on_event(event: Any) -> None:
            line = tally.consume(event)
            if tally.last_kind == "message" and line:
                _say(progress.console, escape(line))
            progress.update(
                task,
                total=tally.total or None,
                completed=tally.done,
                description=escape(tally.label),
                passed=tally.passed,
                failed=tally.failed,
            )

        yield on_event


class _Tally:
    """Counts what the engine reported and phrases one log line per event worth a line."""

    def __init__(self, total: int | None) -> None:
        self.fixed_total = total is not None
        self.total = total or 0
        self.done = self.passed = self.failed = self.skipped = 0
        self.label = "running"
        self.last_kind = ""

    def consume(self, event: Any) -> str | None:
        trace = getattr(event, "trace", None)
        if trace is not None and getattr(trace, "evaluation", None) is not None:
            status = str(getattr(trace.evaluation.status, "value", trace.evaluation.status))
            self.done += 1
            if status == EvaluationStatus.PASSED:
                self.passed += 1
            else:
                self.failed += 1
            self.label = str(trace.definition)
            self.last_kind = "finished"
            uuid = str(trace.workload.uuid)[:8]
            who = f" {trace.solution}" if getattr(trace, "solution", None) else ""
            return f"[{self.done}/{self.total}] {status:<19} {trace.definition}{who} {uuid}"
        if _is_solution_start(event):
            if not self.fixed_total:
                self.total += int(event.total)
            self.label = str(event.definition)
            self.last_kind = "started"
            return None
        if _is_skip(event):
            self.done += 1
            self.skipped += 1
            self.last_kind = "skipped"
            return f"[{self.done}/{self.total}] skipped (already measured) {event.uuid[:8]}"
        message = getattr(event, "message", None)
        if isinstance(message, str) and getattr(event, "level", "info") in ("warning", "error"):
            self.last_kind = "message"
            return f"{event.level}: {message}"
        self.last_kind = ""
        return None


def _is_solution_start(event: Any) -> bool:
    try:
        # Imported here: the report reads events without needing the engine installed.
        from fib_core.bench.events import SolutionStarted
    except ImportError:
        return False
    return isinstance(event, SolutionStarted)


def _is_skip(event: Any) -> bool:
    try:
        # Imported here: the report reads events without needing the engine installed.
        from fib_core.bench.events import WorkloadSkipped
    except ImportError:  # no engine installed: nothing can be skipped
        return False
    return isinstance(event, WorkloadSkipped)


def _say(console: Console, *objects: Any, **kwargs: Any) -> None:
    console.print(*objects, highlight=False, **kwargs)
