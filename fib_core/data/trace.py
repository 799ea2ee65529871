"""Trace: the outcome of one (solution, workload) evaluation, or a bare workload record.

One status enum and these dataclasses travel across every process boundary of the engine, so the
nullability rules (which metrics a status carries) are enforced here once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from fib_core.errors import SchemaError

from . import _schema as s
from .workload import RandomInput, SafetensorsInput, ScalarInput, Workload

T = TypeVar("T")

# The organizers' module layout has the input kinds in ``data.trace``; they live in .workload.
__all__ = [
    "Correctness",
    "Environment",
    "Evaluation",
    "EvaluationStatus",
    "ParseCache",
    "Performance",
    "RandomInput",
    "SafetensorsInput",
    "ScalarInput",
    "Trace",
    "Workload",
]


class EvaluationStatus(StrEnum):
    PASSED = "PASSED"
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"


_STATUS_BY_VALUE = {st.value: st for st in EvaluationStatus}
_WITH_CORRECTNESS = frozenset({EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL})


@dataclass
class Correctness(s.Record):
    """Worst errors over the outputs; inf/NaN are legal values (written as strings)."""

    UNKNOWN = "unknown"  # "extra" is a key of the format here

    max_relative_error: float
    max_absolute_error: float
    extra: dict[str, Any] | None = None
    unknown: dict[str, Any] = field(default_factory=dict, repr=False)
    _keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.max_relative_error = s.read_float(
            self.max_relative_error, "max_relative_error", non_negative=True
        )
        self.max_absolute_error = s.read_float(
            self.max_absolute_error, "max_absolute_error", non_negative=True
        )
        if self.extra is not None:
            s.as_object(self.extra, "extra")

    def to_dict(self) -> dict:
        out: dict[str, Any] = {
            "max_relative_error": s.write_float(self.max_relative_error),
            "max_absolute_error": s.write_float(self.max_absolute_error),
        }
        s.put_optional(out, self._keys, "extra", self.extra)
        return s.with_unknown(out, self.unknown, self._keys)


@dataclass
class Performance(s.Record):
    """Latencies in milliseconds; ``extra`` holds the kit's additions (spread, timing method)."""

    latency_ms: float
    reference_latency_ms: float
    speedup_factor: float
    extra: dict[str, Any] = field(default_factory=dict)
    _keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.latency_ms = s.read_float(self.latency_ms, "latency_ms", non_negative=True)
        self.reference_latency_ms = s.read_float(
            self.reference_latency_ms, "reference_latency_ms", non_negative=True
        )
        self.speedup_factor = s.read_float(self.speedup_factor, "speedup_factor", non_negative=True)

    @property
    def is_valid(self) -> bool:
        """A latency usable for scoring: finite and positive."""
        return math.isfinite(self.latency_ms) and self.latency_ms > 0

    def to_dict(self) -> dict:
        out: dict[str, Any] = {
            "latency_ms": s.write_float(self.latency_ms),
            "reference_latency_ms": s.write_float(self.reference_latency_ms),
            "speedup_factor": s.write_float(self.speedup_factor),
        }
        return s.with_unknown(out, self.extra, self._keys)


@dataclass
class Environment(s.Record):
    hardware: str
    libs: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    _keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        s.check_str(self.hardware, "hardware", non_empty=False)
        s.check_str_dict(self.libs, "libs")

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"hardware": self.hardware, "libs": dict(self.libs)}
        return s.with_unknown(out, self.extra, self._keys)


@dataclass
class Evaluation:
    """Status plus the metrics that status carries (see the nullability rules below)."""

    status: EvaluationStatus
    log: str
    environment: Environment
    timestamp: str
    correctness: Correctness | None = None
    performance: Performance | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    _keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    _KNOWN: ClassVar[frozenset[str]] = frozenset(
        {"status", "log", "correctness", "performance", "environment", "timestamp"}
    )

    def __post_init__(self) -> None:
        status = _STATUS_BY_VALUE.get(self.status) if isinstance(self.status, str) else None
        if status is None:
            raise SchemaError(
                "one of " + ", ".join(_STATUS_BY_VALUE), field="status", found=self.status
            )
        self.status = status
        s.check_str(self.log, "log", non_empty=False)
        s.check_str(self.timestamp, "timestamp")
        if not isinstance(self.environment, Environment):
            raise SchemaError("an Environment", field="environment", found=self.environment)
        self._check_nullability()

    def _check_nullability(self) -> None:
        wants_correctness = self.status in _WITH_CORRECTNESS
        wants_performance = self.status is EvaluationStatus.PASSED
        if wants_correctness != (self.correctness is not None):
            raise SchemaError(
                ("an object" if wants_correctness else "null")
                + f" when status is {self.status.value}",
                field="correctness",
                found=_brief(self.correctness),
            )
        if wants_performance != (self.performance is not None):
            raise SchemaError(
                ("an object" if wants_performance else "null")
                + f" when status is {self.status.value}",
                field="performance",
                found=_brief(self.performance),
            )
        if self.correctness is not None and not isinstance(self.correctness, Correctness):
            raise SchemaError("a Correctness", field="correctness", found=self.correctness)
        if self.performance is not None and not isinstance(self.performance, Performance):
            raise SchemaError("a Performance", field="performance", found=self.performance)

    @property
    def passed(self) -> bool:
        return self.status is EvaluationStatus.PASSED

    @classmethod
    def from_dict(cls, d: dict, cache: ParseCache | None = None) -> Evaluation:
        s.as_object(d, "")
        raw_corr = d.get("correctness")
        raw_perf = d.get("performance")
        parse_env = Environment.from_dict if cache is None else cache.environment
        environment = s.parse_under("environment", parse_env, s.require(d, "environment", ""))
        correctness = (
            None
            if raw_corr is None
            else s.parse_under("correctness", Correctness.from_dict, raw_corr)
        )
        performance = (
            None
            if raw_perf is None
            else s.parse_under("performance", Performance.from_dict, raw_perf)
        )
        return cls(
            status=s.require(d, "status", ""),
            log=d.get("log", ""),
            environment=environment,
            timestamp=s.require(d, "timestamp", ""),
            correctness=correctness,
            performance=performance,
            extra=s.unknown_keys(d, cls._KNOWN),
            _keys=s.key_order(d),
        )

    def to_dict(self) -> dict:
        out: dict[str, Any] = {
            "status": self.status.value,
            "log": self.log,
            "correctness": None if self.correctness is None else self.correctness.to_dict(),
            "performance": None if self.performance is None else self.performance.to_dict(),
            "environment": self.environment.to_dict(),
            "timestamp": self.timestamp,
        }
        return s.with_unknown(out, self.extra, self._keys)


def _brief(value: object) -> object:
    return s.NULL if value is None else type(value).__name__


@dataclass
class Trace:
    """A workload record (solution and evaluation null) or an evaluated one."""

    definition: str
    workload: Workload
    solution: str | None = None
    evaluation: Evaluation | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    _keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    _KNOWN: ClassVar[frozenset[str]] = frozenset(
        {"definition", "solution", "workload", "evaluation"}
    )

    def __post_init__(self) -> None:
        s.check_str(self.definition, "definition")
        if not isinstance(self.workload, Workload):
            raise SchemaError("a Workload", field="workload", found=self.workload)
        if self.solution is not None:
            s.check_str(self.solution, "solution")
        if self.evaluation is not None and not isinstance(self.evaluation, Evaluation):
            raise SchemaError("an Evaluation", field="evaluation", found=self.evaluation)

    def is_workload_trace(self) -> bool:
        """True for a bare workload record (no solution, no evaluation)."""
        return self.solution is None and self.evaluation is None

    def is_workload(self) -> bool:
        """The organizers' name of :meth:`is_workload_trace`."""
        return self.is_workload_trace()

    def is_successful(self) -> bool:
        """True when the evaluation passed (a workload record is not successful)."""
        return self.evaluation is not None and self.evaluation.passed

    @classmethod
    def from_dict(cls, d: dict, cache: ParseCache | None = None) -> Trace:
        """Parse a record; with a :class:`ParseCache`, equal workloads share one object."""
        s.as_object(d, "")
        parse_workload = Workload.from_dict if cache is None else cache.workload
        workload = s.parse_under("workload", parse_workload, s.require(d, "workload", ""))
        raw_eval = d.get("evaluation")
        evaluation = (
            None
            if raw_eval is None
            else s.parse_under("evaluation", lambda raw: Evaluation.from_dict(raw, cache), raw_eval)
        )
        return cls(
            definition=s.require(d, "definition", ""),
            workload=workload,
            solution=d.get("solution"),
            evaluation=evaluation,
            extra=s.unknown_keys(d, cls._KNOWN),
            _keys=s.key_order(d),
        )

    def to_dict(self) -> dict:
        out: dict[str, Any] = {
            "definition": self.definition,
            "solution": self.solution,
            "workload": self.workload.to_dict(),
            "evaluation": None if self.evaluation is None else self.evaluation.to_dict(),
        }
        return s.with_unknown(out, self.extra, self._keys)


class ParseCache:
    """Reuses parsed workloads and environments across the records of one load.

    A dataset's traces repeat the same few thousand workloads and one or two environments; a
    record whose raw dict equals one seen before (same uuid or hardware) gets the object parsed
    then. Loading 50,000 traces spends most of its time building these, so the saving is large.
    Shared objects are meant to be read, not mutated.
    """

    def __init__(self) -> None:
        self._workloads: dict[str, tuple[dict, Workload]] = {}
        self._environments: dict[str, tuple[dict, Environment]] = {}

    def workload(self, raw: Any) -> Workload:
        return _reuse(self._workloads, raw, "uuid", Workload.from_dict)

    def environment(self, raw: Any) -> Environment:
        return _reuse(self._environments, raw, "hardware", Environment.from_dict)


def _reuse(
    seen: dict[str, tuple[dict, T]], raw: Any, key_name: str, parse: Callable[[Any], T]
) -> T:
    """The object parsed before from an equal raw dict with the same ``key_name`` value, else
    ``parse(raw)``, remembered under that value (the latest one wins)."""
    key = raw.get(key_name) if isinstance(raw, dict) else None
    if isinstance(key, str):
        hit = seen.get(key)
        if hit is not None and hit[0] == raw:
            return hit[1]
    parsed = parse(raw)
    seen[raw[key_name]] = (raw, parsed)
    return parsed
