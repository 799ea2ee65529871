"""Workloads handed to ``Benchmark.run_solution`` one at a time instead of as a list.

Several GPUs of one machine share one queue (:mod:`fib_core.bench.engine.work_queue`): each GPU's
engine takes its next workload only when it is free for it, so none waits on a split made
before the run. The engine sees only this small interface: ``take``/``peek`` over a list it
already knows.

Example (``source`` is anything with ``take()`` and ``peek()`` returning an index into
``items``, or None when nothing is left)::

    stream = WorkloadStream(workloads, source)
    traces = bench.run_solution(solution, stream)   # runs what it takes, in that order
    stream.taken                                    # the items it handed out, as given
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol


class IndexSource(Protocol):
    def take(self) -> int | None: ...

    def peek(self) -> int | None: ...


class WorkloadStream:
    """``items`` (workloads, or records holding one as ``.workload``) handed out as
    workloads, in the order ``source`` gives their indices; ``total`` counts them all, whoever
    runs them; ``taken`` holds the items this stream handed out, as given."""

    def __init__(self, items: Sequence[Any], source: IndexSource) -> None:
        self.items = list(items)
        self.source = source
        self.taken: list[Any] = []

    @property
    def total(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Any]:
        while (index := self.source.take()) is not None:
            self.taken.append(self.items[index])
            yield _workload(self.items[index])

    def peek(self) -> Any:
        """The workload this stream would hand out next (another consumer may take it)."""
        index = self.source.peek()
        return None if index is None else _workload(self.items[index])


def _workload(item: Any) -> Any:
    return getattr(item, "workload", item)
