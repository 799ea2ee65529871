"""One ``--resume`` run per (dataset, definition, solution) at a time.

Two resumed runs of one solution on one dataset, started together, would each see the same
unfinished pairs and both measure all of them. The first run takes an exclusive file lock
(``flock``) on ``traces/.<definition>.<solution>.lock`` inside the dataset; the second waits
for it, then re-reads the traces the first appended and skips what is done. The lock goes with
the process, so a killed run never leaves a stale lock behind.

Example::

    with ResumeLock(trace_set.root, "gdn_decode", "my-solution", on_wait=print):
        merge_stored_traces(trace_set, "gdn_decode")   # what other runs finished meanwhile
        ...                                            # run and append the rest
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock, as before
    fcntl = None  # type: ignore[assignment]


def _segment(text: str) -> str:
    # Imported here: fib_core.data.dataset_layout loads pydantic (~50 ms); this module's import does not.
    from fib_core.data.dataset_layout import path_segment

    return path_segment(text)


class ResumeLock:
    """Exclusive lock of one solution's runs on one definition of a dataset."""

    def __init__(
        self,
        root: Path,
        definition: str,
        solution: str,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(root) / "traces" / f".{_segment(definition)}.{_segment(solution)}.lock"
        self.on_wait = on_wait
        self._fd: int | None = None

    def acquire(self) -> None:
        if fcntl is None or self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if self.on_wait is not None:
                self.on_wait(
                    f"another run of this solution on this dataset holds {self.path}; "
                    "waiting for it to finish, then resuming after it"
                )
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def __enter__(self) -> ResumeLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def merge_stored_traces(trace_set: Any, definition: str) -> int:
    """Add to ``trace_set`` the traces of ``definition`` that its files hold but its memory does
    not (appended by another run since it was loaded); returns how many were added."""
    # Imported here: fib_core.data.json_io loads pydantic (~50 ms); this module's import does not.
    from fib_core.data.json_io import load_jsonl
    from fib_core.data.trace import Trace

    if trace_set.root is None:
        return 0
    known = {_key(t) for t in trace_set.traces.get(definition, [])}
    added = 0
    for file in sorted((Path(trace_set.root) / "traces").rglob(f"{definition}.jsonl")):
        for trace in load_jsonl(file, Trace):
            if trace.is_workload_trace() or trace.definition != definition:
                continue
            key = _key(trace)
            if key in known:
                continue
            known.add(key)
            trace_set.traces.setdefault(definition, []).append(trace)
            added += 1
    return added


def _key(trace: Any) -> tuple:
    ev = trace.evaluation
    return (
        trace.solution,
        trace.workload.uuid,
        ev.timestamp if ev else None,
        ev.status.value if ev else None,
        ev.extra.get("solution_hash") if ev else None,
    )
