"""Messages between the engine (parent) and its worker processes.

Schema objects cross the boundary as their JSON dicts (``to_dict``/``from_dict``): that is the
format's own serialisation, so nothing the schema caches in memory (compiled constraint code)
has to be picklable. Results carry the status as the ``EvaluationStatus`` member (a ``str``
enum: a plain string given by older code is converted) and the metrics as dicts.

Worker -> parent: ``ready``, ``phase``, ``check`` (outputs to judge, several may be in flight,
answered in order; the outputs themselves in a slot of the shared output buffer, or as bytes
after the header) and ``result`` frames (:mod:`fib_core.bench.evaluation.wire`; validated field by field).
Parent -> worker: ``("arena", id, slots, slot_bytes)`` with the shared output buffer's
descriptor (:mod:`fib_core.bench.evaluation.exchange`; before a task that needs a larger one),
``("eval", EvalTask)``, ``("verdict", dict)``, ``("close",)``.
Parent -> judge: the same ``("arena", ...)`` message once per buffer, ``("task", EvalTask)``
when a task starts (no reply: the judge prefetches), ``("next", workload dict)`` naming the
workload after it (no reply: the judge reads its files ahead), ``("check", ...)`` (naming the slot, or
followed by the bytes), ``("latency", ...)``, ``("forget",)``, ``("close",)``
(:mod:`fib_core.bench.evaluation.judge`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fib_core.bench.config import BenchmarkConfig
from fib_core.data.trace import EvaluationStatus


@dataclass
class EvalTask:
    """One (solution, workload) evaluation, self-contained."""

    task_id: int
    definition: dict
    solution: dict
    workload: dict
    config: BenchmarkConfig
    dataset_root: str | None


@dataclass
class EvalResult:
    """What a worker measured; the parent turns it into a Trace.

    ``fatal`` asks the parent to replace the worker (the CUDA context is no longer usable).
    ``extra`` becomes ``evaluation`` extras (seed, device, warnings, input sets...).
    """

    task_id: int
    status: EvaluationStatus
    log: str
    correctness: dict | None = None
    performance: dict | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    fatal: bool = False

    def __post_init__(self) -> None:
        self.status = EvaluationStatus(self.status)
