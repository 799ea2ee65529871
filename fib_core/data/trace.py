"""Trace: the outcome of one (solution, workload) evaluation, or a bare workload record.

One status enum and these dataclasses travel across every process boundary of the engine, so the
nullability rules (which metrics a status carries) are enforced here once.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

from pydantic import Field, model_validator

from .fields import Measure, NonEmptyStr, Str
from .model import OpenRecord, Record
from .validation import NULL, rule_error
from .workload import RandomInput, SafetensorsInput, ScalarInput, Workload

# The organizers' module layout has the input kinds in ``data.trace``; they live in .workload.
__all__ = [
    "Correctness",
    "Environment",
    "Evaluation",
    "EvaluationStatus",
    "Performance",
    "RandomInput",
    "SafetensorsInput",
    "ScalarInput",
    "Trace",
    "Workload",
]


class EvaluationStatus(StrEnum):
    """The outcome of evaluating one solution on one workload."""

    PASSED = "PASSED"
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"


_WITH_CORRECTNESS = frozenset({EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL})


class Correctness(Record):
    """Worst errors over the outputs; inf/NaN are legal values (written as strings)."""

    POSITIONAL = ("max_relative_error", "max_absolute_error", "extra")
    ALWAYS = frozenset({"max_relative_error", "max_absolute_error"})

    max_relative_error: Measure = 0.0
    """Largest relative error over the output elements (NaN: not measurable)."""
    max_absolute_error: Measure = 0.0
    """Largest absolute error over the output elements (NaN: not measurable)."""
    extra: dict[str, Any] | None = None
    """Further figures of the check (tolerances, matched ratio per output, checker notes)."""


class Performance(OpenRecord):
    """Latencies in milliseconds; ``extra`` holds the kit's additions (spread, timing method)."""

    POSITIONAL = ("latency_ms", "reference_latency_ms", "speedup_factor")
    ALWAYS = frozenset(POSITIONAL)

    latency_ms: Measure = 0.0
    """The solution's latency."""
    reference_latency_ms: Measure = 0.0
    """The reference's latency on the same inputs."""
    speedup_factor: Measure = 0.0
    """reference_latency_ms / latency_ms."""

    @property
    def is_valid(self) -> bool:
        """A latency usable for scoring: finite and positive."""
        return math.isfinite(self.latency_ms) and self.latency_ms > 0


class Environment(OpenRecord):
    """Where the evaluation ran: the hardware and the versions of the libraries that matter."""

    POSITIONAL = ("hardware", "libs")
    ALWAYS = frozenset(POSITIONAL)

    hardware: NonEmptyStr
    """The device (e.g. NVIDIA B200)."""
    libs: dict[str, Str] = Field(default_factory=dict)
    """Library name -> version."""


class Evaluation(OpenRecord):
    """Status plus the metrics that status carries (see the nullability rules below)."""

    POSITIONAL = ("status", "log", "environment", "timestamp", "correctness", "performance")
    ALWAYS = frozenset(POSITIONAL)

    status: EvaluationStatus
    """The verdict."""
    log: Str = ""
    """Captured output of the evaluation (the kit's: a short reason when it failed)."""
    correctness: Correctness | None = None
    """Errors against the reference (PASSED and INCORRECT_NUMERICAL only)."""
    performance: Performance | None = None
    """Latencies (PASSED only)."""
    environment: Environment
    """Where it ran."""
    timestamp: NonEmptyStr
    """When it ran (ISO 8601)."""

    @model_validator(mode="after")
    def _check_nullability(self) -> Evaluation:
        status = self.status
        wants_correctness = status in _WITH_CORRECTNESS
        wants_performance = status is EvaluationStatus.PASSED
        if wants_correctness != (self.correctness is not None):
            raise rule_error(
                ("an object" if wants_correctness else "null") + f" when status is {status.value}",
                field="correctness",
                found=_brief(self.correctness),
            )
        if wants_performance != (self.performance is not None):
            raise rule_error(
                ("an object" if wants_performance else "null") + f" when status is {status.value}",
                field="performance",
                found=_brief(self.performance),
            )
        return self

    @property
    def passed(self) -> bool:
        return self.status is EvaluationStatus.PASSED

    @property
    def log_file(self) -> str | None:
        """The older records' spelling of the log: the path of a log file (None when the
        record has none). Kept as a key of the record, so it is written back as it was."""
        return self.extra.get("log_file")


def _brief(value: object) -> object:
    return NULL if value is None else type(value).__name__


class Trace(OpenRecord):
    """A workload record (solution and evaluation null) or an evaluated one."""

    POSITIONAL = ("definition", "workload", "solution", "evaluation")
    ALWAYS = frozenset(POSITIONAL)

    definition: NonEmptyStr
    """Name of the definition."""
    solution: NonEmptyStr | None = None
    """Name of the solution evaluated (null in a workload record)."""
    workload: Workload
    """The workload."""
    evaluation: Evaluation | None = None
    """The outcome (null in a workload record)."""

    def is_workload_trace(self) -> bool:
        """True for a bare workload record (no solution, no evaluation)."""
        return self.solution is None and self.evaluation is None

    def is_workload(self) -> bool:
        """The organizers' older name of :meth:`is_workload_trace`."""
        return self.is_workload_trace()

    def is_successful(self) -> bool:
        """True when the evaluation passed (a workload record is not successful)."""
        return self.evaluation is not None and self.evaluation.passed
