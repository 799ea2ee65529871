"""Progress events the engine hands to the caller's ``on_event`` callback (in the parent process).

Small immutable dataclasses so a launcher can draw a progress bar or print a log line without
knowing anything about workers: match on the type, read the fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fib_core.data.trace import Trace


@dataclass(frozen=True)
class SolutionStarted:
    """A solution is about to run on ``total`` workloads of ``definition``."""

    solution: str
    definition: str
    total: int


@dataclass(frozen=True)
class WorkloadStarted:
    """Workload ``index`` (0-based) of ``total`` was handed to a worker."""

    uuid: str
    index: int
    total: int
    solution: str | None = None


@dataclass(frozen=True)
class WorkloadFinished:
    """A workload finished (any status); ``trace`` is what was recorded for it."""

    trace: Trace
    index: int = 0
    total: int = 0


@dataclass(frozen=True)
class WorkloadSkipped:
    """``--resume`` found a trace for this (solution, workload) pair already."""

    uuid: str
    solution: str
    index: int = 0
    total: int = 0


@dataclass(frozen=True)
class Log:
    """A line worth showing (phase changes, worker restarts, warnings)."""

    message: str
    level: str = "info"


Event = SolutionStarted | WorkloadStarted | WorkloadFinished | WorkloadSkipped | Log


def emit(on_event: Any, event: Event) -> None:
    """Call the user's callback if there is one; a failing callback must not kill the run."""
    if on_event is None:
        return
    try:
        on_event(event)
    except Exception as err:  # a progress bar bug is not a benchmark failure
        import logging

        logging.getLogger("fib_core.bench").warning("on_event callback failed: %s", err)
