"""The results of one run, as the report layer sees them: one row per workload.

Traces are the engine's record (one JSON line per solution x workload, in the FlashInfer-Trace
format). A contestant, a CI job or a Modal launcher wants something flatter: the figures a
results table shows, for one (definition, solution) pair, plus where they were measured. That is
:class:`RunResults`. It is a plain dataclass so it pickles across processes (Modal shards), and it
has its own small JSON file format (``to_json`` / ``from_json``) so a later run can be compared
with this one (``--compare``) without keeping the whole dataset around.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fib_core.data.json_io import write_float
from fib_core.data.trace import EvaluationStatus
from fib_core.errors import FibError

RESULTS_FORMAT = "fib_core.run_results"
RESULTS_VERSION = 1

GPU_MODE = "GPU"
CPU_SMOKE_MODE = "CPU smoke run — correctness only, timings are wall-clock and not comparable"

DEVICE_KINDS = ("cuda", "cpu")
ACHIEVED_UNITS = ("GB/s", "TFLOP/s")
PASSED = EvaluationStatus.PASSED.value
STATUSES = tuple(status.value for status in EvaluationStatus)
LOG_TAIL_LINES = 10


class ResultsFileError(FibError):
    """A results JSON file is missing, corrupt, or not one this kit wrote."""


def mode_for_device(device: str) -> str:
    """The mode label a table shows for a device kind ("cuda" or "cpu")."""
    return GPU_MODE if device == "cuda" else CPU_SMOKE_MODE


@dataclass(frozen=True)
class Achieved:
    """Throughput the solution reached: GB/s for memory-bound workloads, TFLOP/s otherwise."""

    value: float
    unit: str

    def __post_init__(self) -> None:
        if self.unit not in ACHIEVED_UNITS:
            raise ValueError(
                f"Achieved.unit: found {self.unit!r}, expected one of {ACHIEVED_UNITS}"
            )
        _check_number("Achieved.value", self.value, allow_none=False)

    def __str__(self) -> str:
        return (
            f"{self.value:.1f} {self.unit}" if self.value >= 10 else f"{self.value:.3g} {self.unit}"
        )


@dataclass(frozen=True)
class Spread:
    """Run-to-run spread of the timed calls (milliseconds); any figure may be unknown."""

    p10_ms: float | None = None
    p90_ms: float | None = None
    std_ms: float | None = None
    min_ms: float | None = None

    def __post_init__(self) -> None:
        for name in ("p10_ms", "p90_ms", "std_ms", "min_ms"):
            _check_number(f"Spread.{name}", getattr(self, name))

    def relative_width(self, center_ms: float | None) -> float | None:
        """(p90 - p10) / center: the noise band of this measurement, as a fraction."""
        if self.p10_ms is None or self.p90_ms is None or not center_ms:
            return None
        return max(0.0, self.p90_ms - self.p10_ms) / center_ms


@dataclass
class WorkloadResult:
    """One row of the results table: a workload's verdict and figures.

    ``speedup`` is reference latency / solution latency (higher is better). ``roofline_fraction``
    is the roofline floor divided by the measured latency (1.0 = at the hardware's limit).
    ``reason`` is one line saying why a workload failed (empty when it passed);
    ``log_tail`` holds the last lines of the worker's log for the failure report.
    ``warnings`` are the engine's cautions about this measurement (timing method limits,
    mutated inputs...), shown once each under the table.
    """

    uuid: str
    axes: dict[str, int]
    status: str
    latency_ms: float | None = None
    reference_latency_ms: float | None = None
    speedup: float | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    achieved: Achieved | None = None
    roofline_fraction: float | None = None
    floor_ms: float | None = None
    reason: str = ""
    log_tail: list[str] = field(default_factory=list)
    spread: Spread | None = None
    timing_method: str | None = None
    warnings: list[str] = field(default_factory=list)
    # What decided a PASSED verdict when the errors look alarming (see report.verdict_notes).
    decided_by: str = ""
    # Timed calls behind ``latency_ms`` (None: unknown); one sample carries no spread.
    samples: int | None = None
    # The datasheet peak the roofline floor assumes ("3350 GB/s (H100 SXM)"), the GPU clocks
    # the worker read before timing ("SM 1980/1980 MHz, mem 2619 MHz") and what was done to
    # the L2 cache between timed calls: the conditions a latency is only valid under.
    floor_peak: str | None = None
    clocks: str | None = None
    l2_policy: str | None = None
    # Of ``latency_ms``, the time the GPU ran the solution's own kernels (the rest of the span
    # is the GPU waiting for the host between them); None where the timer cannot tell.
    busy_ms: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.uuid, str) or not self.uuid:
            raise ValueError(
                f"WorkloadResult.uuid: found {self.uuid!r}, expected a non-empty string"
            )
        self.status = str(getattr(self.status, "value", self.status))
        if self.status not in STATUSES:
            raise ValueError(
                f"WorkloadResult.status: found {self.status!r}, expected one of {', '.join(STATUSES)}"
            )
        if not isinstance(self.axes, dict):
            raise ValueError(f"WorkloadResult.axes: found {self.axes!r}, expected a dict")
        for name in _TIMING_FIELDS:
            _check_number(f"WorkloadResult.{name}", getattr(self, name))
        for name in _ERROR_FIELDS:  # an output holding NaN or inf has such errors: keep them
            _check_number(f"WorkloadResult.{name}", getattr(self, name), allow_nan=True)
        if "\n" in self.reason:
            raise ValueError("WorkloadResult.reason: must be one line")
        if self.passed and self.latency_ms is None:
            raise ValueError(f"WorkloadResult {self.uuid}: a PASSED workload needs latency_ms")

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    @property
    def short_uuid(self) -> str:
        return self.uuid[:8]

    def axes_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.axes.items())

    def to_dict(self) -> dict[str, Any]:
        """JSON-able; non-finite errors become the format's strings "Infinity", "-Infinity",
        "NaN" (strict JSON)."""
        return {
            "uuid": self.uuid,
            "axes": dict(self.axes),
            "status": self.status,
            "latency_ms": self.latency_ms,
            "reference_latency_ms": self.reference_latency_ms,
            "speedup": self.speedup,
            "max_abs_error": write_float(self.max_abs_error),
            "max_rel_error": write_float(self.max_rel_error),
            "achieved": (
                {"value": self.achieved.value, "unit": self.achieved.unit}
                if self.achieved
                else None
            ),
            "roofline_fraction": self.roofline_fraction,
            "floor_ms": self.floor_ms,
            "reason": self.reason,
            "log_tail": list(self.log_tail),
            "spread": (
                {
                    "p10_ms": self.spread.p10_ms,
                    "p90_ms": self.spread.p90_ms,
                    "std_ms": self.spread.std_ms,
                    "min_ms": self.spread.min_ms,
                }
                if self.spread
                else None
            ),
            "timing_method": self.timing_method,
            "warnings": list(self.warnings),
            "decided_by": self.decided_by,
            "samples": self.samples,
            "floor_peak": self.floor_peak,
            "clocks": self.clocks,
            "l2_policy": self.l2_policy,
            "busy_ms": self.busy_ms,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorkloadResult:
        achieved = d.get("achieved")
        spread = d.get("spread")
        return cls(
            uuid=d["uuid"],
            axes=dict(d.get("axes") or {}),
            status=d["status"],
            latency_ms=d.get("latency_ms"),
            reference_latency_ms=d.get("reference_latency_ms"),
            speedup=d.get("speedup"),
            max_abs_error=_decode_float(d.get("max_abs_error")),
            max_rel_error=_decode_float(d.get("max_rel_error")),
            achieved=Achieved(**achieved) if achieved else None,
            roofline_fraction=d.get("roofline_fraction"),
            floor_ms=d.get("floor_ms"),
            reason=d.get("reason") or "",
            log_tail=list(d.get("log_tail") or []),
            spread=Spread(**spread) if spread else None,
            timing_method=d.get("timing_method"),
            warnings=list(d.get("warnings") or []),
            decided_by=str(d.get("decided_by") or ""),
            samples=d.get("samples"),
            floor_peak=d.get("floor_peak"),
            clocks=d.get("clocks"),
            l2_policy=d.get("l2_policy"),
            busy_ms=d.get("busy_ms"),
        )


@dataclass
class RunResults:
    """Every workload result of one solution on one definition, and where it ran.

    ``device`` is the kind ("cuda" or "cpu"); ``mode`` is the label a table shows, and says
    plainly when timings are CPU wall-clock figures that must not be compared with GPU ones.
    ``environment`` is the trace's environment (``hardware`` and ``libs``), kept so two results
    files can be checked for comparability.
    """

    definition: str
    solution: str | None
    author: str | None = None
    device: str = "cuda"
    gpu_name: str | None = None
    mode: str = ""
    environment: dict[str, Any] = field(default_factory=dict)
    rows: list[WorkloadResult] = field(default_factory=list)
    created: str = ""
    # The contest's score against the FlashInfer baseline (None: not scored here), and its
    # details (fib_core.baselines.contest.ContestScore as a dict: what it covers, the
    # baseline's latency per workload uuid, or why there is no score).
    contest_score: float | None = None
    contest: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.definition, str) or not self.definition:
            raise ValueError(
                f"RunResults.definition: found {self.definition!r}, expected a definition name"
            )
        if self.device not in DEVICE_KINDS:
            raise ValueError(
                f"RunResults.device: found {self.device!r}, expected one of {DEVICE_KINDS}"
            )
        if not self.mode:
            self.mode = mode_for_device(self.device)
        if not self.created:
            self.created = datetime.now(UTC).isoformat(timespec="seconds")
        seen: set[str] = set()
        for row in self.rows:
            if row.uuid in seen:
                raise ValueError(f"RunResults: workload {row.uuid} appears twice")
            seen.add(row.uuid)

    @property
    def is_cpu_smoke(self) -> bool:
        return self.device == "cpu"

    def row(self, uuid: str) -> WorkloadResult | None:
        return next((r for r in self.rows if r.uuid == uuid), None)

    @classmethod
    def from_traces(cls, traces: Iterable[Any], definition: Any, **options: Any) -> RunResults:
        """Build the rows of one (definition, solution) run from its traces.

        ``definition`` is a ``Definition`` or its name; ``options`` are keyword-only:
        ``gpu_name``, ``solution``, ``author``, ``device`` (each None by default). Traces of
        other definitions or (when ``solution`` is given) other solutions are ignored; when a
        workload has several traces, the last one wins (the newest run) and rows keep the order
        of first appearance. Roofline figures come from the definition's cost model when the GPU
        is known, else stay None. The work is done by :func:`fib_core.report.rows.results_from_traces`.
        """
        from fib_core.report.rows import results_from_traces

        return results_from_traces(cls, traces, definition, **options)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": RESULTS_FORMAT,
            "version": RESULTS_VERSION,
            "definition": self.definition,
            "solution": self.solution,
            "author": self.author,
            "device": self.device,
            "gpu_name": self.gpu_name,
            "mode": self.mode,
            "environment": self.environment,
            "created": self.created,
            "rows": [r.to_dict() for r in self.rows],
            "contest_score": self.contest_score,
            "contest": self.contest,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, source: str = "results") -> RunResults:
        """Rebuild from ``to_dict`` output; raises :class:`ResultsFileError` naming ``source``."""
        check_format_tag(
            d,
            source,
            ResultsFileError,
            "results file of this kit",
            (RESULTS_FORMAT, RESULTS_VERSION),
            ("pass a file written by --json / RunResults.to_json", "re-run to write a new file"),
        )
        try:
            return cls(
                definition=d["definition"],
                solution=d.get("solution"),
                author=d.get("author"),
                device=d.get("device", "cuda"),
                gpu_name=d.get("gpu_name"),
                mode=d.get("mode") or "",
                environment=dict(d.get("environment") or {}),
                created=d.get("created") or "",
                rows=[WorkloadResult.from_dict(r) for r in d.get("rows", [])],
                contest_score=d.get("contest_score"),
                contest=d.get("contest"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            what = f"missing field {err}" if isinstance(err, KeyError) else str(err).splitlines()[0]
            raise ResultsFileError(
                f"{source}: malformed results file: {what}; re-run to write a new file"
            ) from err

    def to_json(self, path: str | Path) -> Path:
        """Write atomically (temp file + rename): an interrupted write never leaves half a file."""
        from fib_core.atomic import atomic_write_text

        path = Path(path)
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n")
        return path

    @classmethod
    def from_json(cls, path: str | Path) -> RunResults:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ResultsFileError(f"{path}: results file not found; check the path") from None
        except (OSError, UnicodeDecodeError) as err:
            raise ResultsFileError(f"{path}: cannot read results file ({err})") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ResultsFileError(
                f"{path}:{err.lineno}: not valid JSON ({err.msg}); the file is corrupt or "
                "truncated, re-run to write a new one"
            ) from None
        except RecursionError:
            raise ResultsFileError(
                f"{path}: JSON nested too deeply to read; not a results file, re-run to write one"
            ) from None
        return cls.from_dict(data, source=str(path))


def merge(shards: Sequence[RunResults], order: Sequence[str] | None = None) -> RunResults:
    """Join the shards of one run (e.g. one per Modal container) into one result.

    All shards must share definition, solution and device kind. Rows follow ``order`` (workload
    uuids, typically the dataset's order) when given, else the order in which they first appear
    across the shards; uuids not in ``order`` come after, in that same first-seen order. A
    workload present in several shards keeps the later shard's row (a re-run replaces).
    """
    if not shards:
        raise FibError("merge: no results to merge; pass at least one results file")
    first = shards[0]
    for other in shards[1:]:
        for name in ("definition", "solution", "device"):
            a, b = getattr(first, name), getattr(other, name)
            if a != b:
                raise FibError(
                    f"merge: results disagree on {name} ({a!r} vs {b!r}); "
                    "merge only shards of one run"
                )
    by_uuid: dict[str, WorkloadResult] = {}
    seen: list[str] = []
    for shard in shards:
        for row in shard.rows:
            if row.uuid not in by_uuid:
                seen.append(row.uuid)
            by_uuid[row.uuid] = row
    if order is not None:
        rank = {u: i for i, u in enumerate(order)}
        seen.sort(key=lambda u: rank.get(u, len(rank)))
    gpu_names = [s.gpu_name for s in shards if s.gpu_name]
    return RunResults(
        definition=first.definition,
        solution=first.solution,
        author=next((s.author for s in shards if s.author), None),
        device=first.device,
        gpu_name=gpu_names[0] if gpu_names else None,
        mode=first.mode,
        environment=dict(first.environment),
        rows=[by_uuid[u] for u in seen],
        created=max(s.created for s in shards),
    )


_TIMING_FIELDS = ("latency_ms", "reference_latency_ms", "speedup", "roofline_fraction", "floor_ms")
_ERROR_FIELDS = ("max_abs_error", "max_rel_error")
# Read back: the format's spellings, and the short ones older results files hold.
_NON_FINITE = {
    "Infinity": math.inf,
    "-Infinity": -math.inf,
    "NaN": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "nan": math.nan,
}


def check_format_tag(
    d: Any,
    source: str,
    error: type[Exception],
    what: str,
    tag: tuple[str, int],
    fixes: tuple[str, str],
) -> None:
    """Raise ``error`` unless ``d`` is a dict carrying this kit's ``"format"`` and
    ``"version"`` (``tag``): a foreign file and an old one each get one line naming
    ``source`` and the matching entry of ``fixes``."""
    fmt, version = tag
    if not isinstance(d, dict) or d.get("format") != fmt:
        raise error(f'{source}: not a {what} (no "format": "{fmt}"); {fixes[0]}')
    if d.get("version") != version:
        raise error(
            f"{source}: {what} version {d.get('version')!r} is not supported "
            f"(expected {version}); {fixes[1]}"
        )


def _check_number(
    name: str, value: object, *, allow_none: bool = True, allow_nan: bool = False
) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}: found {value!r}, expected a number")
    if not allow_nan and not math.isfinite(value):
        raise ValueError(f"{name}: found {value}, expected a finite number")


def _decode_float(value: object) -> object:
    if isinstance(value, str) and value in _NON_FINITE:
        return _NON_FINITE[value]
    return value
