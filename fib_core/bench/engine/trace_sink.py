"""Saving traces as they are measured, without losing them when the dataset cannot take them.

A traces file that turns out to be a folder, a full disk or a file-size limit must not end a
long run with a traceback and throw away what it measured. :class:`TraceSink` appends to the
dataset as usual; when that fails it says so once (the file and the reason) and appends the
records to a fallback file under ``$FIB_CACHE_DIR/unsaved-traces/`` (else the system's temp
folder), which the message names. Records are whole or absent: ``append_jsonl`` undoes a
half-written record.

Example::

    sink = TraceSink(trace_set, on_problem=print)
    sink.save([trace])          # the dataset, or the fallback file
    sink.problems               # one line per failure, for the launcher's exit status
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from fib_core.data.json_io import append_jsonl
from fib_core.paths import cache_dir


def _folders() -> list[Path]:
    return [
        cache_dir() / "unsaved-traces",
        Path(tempfile.gettempdir()) / "fib_core-unsaved-traces",
    ]


def _reason(err: OSError) -> str:
    return err.strerror or type(err).__name__


class TraceSink:
    """Appends traces to a TraceSet; falls back to a file of its own when that fails."""

    def __init__(self, trace_set: Any, on_problem: Callable[[str], None] | None = None) -> None:
        self.trace_set = trace_set
        self.on_problem = on_problem
        self.problems: list[str] = []
        self.fallback: Path | None = None
        self._stamp = datetime.now().strftime("%Y%m%d-%H%M%S")

    def save(self, traces: Sequence[Any]) -> None:
        """Append ``traces`` to the dataset, or to the fallback file if the dataset refuses."""
        try:
            self.trace_set.add_traces(traces)  # in memory first, then the file
            return
        except OSError as err:
            failed = err.filename or (self.trace_set.root or "the dataset")
            reason = _reason(err)
        where = self._write_fallback(traces)
        if where is not None:
            line = (
                f"cannot append traces to {failed} ({reason}); kept them in {where} "
                "(copy them into the dataset's traces/ once it is fixed)"
            )
        else:
            line = (
                f"cannot append traces to {failed} ({reason}) nor to a fallback file; the "
                "results are only in this run's output and the traces it returns (free disk "
                "space or raise the file-size limit before the next run)"
            )
        if not self.problems or self.problems[-1] != line:
            self._report(line)

    def _write_fallback(self, traces: Sequence[Any]) -> Path | None:
        candidates = [self.fallback] if self.fallback is not None else []
        name = f"{traces[0].definition}-{self._stamp}-{os.getpid()}.jsonl"
        candidates += [folder / name for folder in _folders()]
        for path in candidates:
            try:
                append_jsonl(path, traces)
            except OSError:
                continue
            self.fallback = path
            return path
        return None

    def _report(self, line: str) -> None:
        self.problems.append(line)
        if self.on_problem is not None:
            self.on_problem(line)


def write_or_fallback(
    write: Callable[[Path], Any], path: Path, what: str
) -> tuple[Path | None, str | None]:
    """``write(path)``; if that fails, ``write`` to a fallback file of the same name.

    Returns (the path written, None) or (the fallback or None, one line saying what happened),
    so a launcher that has already measured everything never ends in a traceback over its
    output file.
    """
    try:
        write(path)
        return path, None
    except OSError as err:
        reason = _reason(err)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for folder in _folders():
        fallback = folder / f"{stamp}-{os.getpid()}-{path.name or what}"
        try:
            fallback.parent.mkdir(parents=True, exist_ok=True)
            write(fallback)
        except OSError:
            continue
        return (
            fallback,
            f"cannot write {what} to {path} ({reason}); wrote them to {fallback} instead",
        )
    return None, f"cannot write {what} to {path} ({reason}) nor to a fallback file"
