"""The server's tasks: one per submitted solution, ``pending`` -> ``running`` ->
``completed`` | ``failed``, kept in memory (never where a solution could read them).

``completed`` means the evaluation ran to its end, whatever the verdicts; ``failed`` means it
could not (no workload selected, the dataset refused the run). A bounded number of tasks is
kept: when the store is full, the oldest finished ones go first.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class TaskStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


FINISHED = (TaskStatus.COMPLETED, TaskStatus.FAILED)


@dataclass
class Task:
    id: str
    definition: str
    solution: dict[str, Any]  # the normalized solution's JSON form
    workload_uuids: list[str]
    status: TaskStatus = TaskStatus.PENDING
    traces: list[dict[str, Any]] | None = None
    error: str | None = None
    device: str | None = None
    created: float = field(default_factory=time.monotonic)
    finished: float | None = None

    @property
    def solution_name(self) -> str:
        return str(self.solution["name"])

    def view(self) -> dict[str, Any]:
        """The task as ``GET /tasks/{id}`` returns it (the organizers' TaskResponse)."""
        return {"task_id": self.id, "status": self.status.value, "definition": self.definition,
                "solution": self.solution_name, "traces": self.traces, "error": self.error}


class StoreFull(Exception):
    """Every kept task is still pending or running: no room for another."""


class TaskStore:
    """Thread-safe tasks by id; the web app long-polls
    :meth:`unfinished`.

    >>> store = TaskStore(max_tasks=2)
    >>> task = store.create("toy", {"name": "s"}, ["w1"])
    >>> store.get(task.id).status.value
    'pending'
    """

    def __init__(self, max_tasks: int = 1000) -> None:
        self._tasks: dict[str, Task] = {}
        self._changed = threading.Condition()
        self._max = max_tasks

    def create(self, definition: str, solution: dict[str, Any], workloads: list[str]) -> Task:
        task = Task(uuid.uuid4().hex, definition, solution, workloads)
        with self._changed:
            if len(self._tasks) >= self._max:
                self._evict()
            self._tasks[task.id] = task
        return task

    def _evict(self) -> None:
        done = sorted((t for t in self._tasks.values() if t.status in FINISHED),
                      key=lambda t: t.finished or 0.0)
        if not done:
            raise StoreFull
        for old in done[: max(1, len(done) // 10)]:
            del self._tasks[old.id]

    def get(self, task_id: str) -> Task | None:
        with self._changed:
            return self._tasks.get(task_id)

    def remove(self, task_id: str) -> None:
        with self._changed:
            self._tasks.pop(task_id, None)

    def running(self, task: Task, device: str) -> None:
        with self._changed:
            task.status, task.device = TaskStatus.RUNNING, device
            self._changed.notify_all()

    def finish(self, task: Task, traces: list[dict[str, Any]] | None, error: str | None) -> None:
        """``completed`` with ``traces``, or ``failed`` with ``error``."""
        with self._changed:
            task.traces, task.error = traces, error
            task.status = TaskStatus.FAILED if error is not None else TaskStatus.COMPLETED
            task.finished = time.monotonic()
            self._changed.notify_all()

    def unfinished(self, task_ids: list[str]) -> bool:
        """Whether any task of ``task_ids`` (that exists) is still pending or running."""
        with self._changed:
            return any(t.status not in FINISHED for t in (self._tasks.get(i) for i in task_ids)
                       if t is not None)
