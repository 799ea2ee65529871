"""The results of one run, as the report layer sees them: one row per workload.

Traces are the engine's record (one JSON line per solution x workload, in the FlashInfer-Trace
format). A contestant, a CI job or a Modal launcher wants something flatter: the figures a
results table shows, for one (definition, solution) pair, plus where they were measured. That is
:class:`RunResults`. It is a plain dataclass so it pickles across processes (Modal shards), and it
has its own small JSON file format (``to_json`` / ``from_json``) so a later run can be compared
with this one (``--compare``) without keeping the whole dataset around.

Its rows are :class:`~fib_core.report.workload_result.WorkloadResult`; reading them from
traces is :mod:`fib_core.report.rows`' job, which this module calls and which needs nothing
from it.

Example::

    from fib_core.report.results import RunResults
    results = RunResults.from_traces(traces, "gdn_decode_qk4_v8_d128_k_last")
    results.to_json("runs/last.json")
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fib_core.atomic import atomic_write_text
from fib_core.errors import FibError
from fib_core.report import rows as trace_rows
from fib_core.report.roofline_view import RooflineView
from fib_core.report.workload_result import WorkloadResult

RESULTS_FORMAT = "fib_core.run_results"
RESULTS_VERSION = 1

GPU_MODE = "GPU"
CPU_SMOKE_MODE = "CPU smoke run — correctness only, timings are wall-clock and not comparable"

DEVICE_KINDS = ("cuda", "cpu")


class ResultsFileError(FibError):
    """A results JSON file is missing, corrupt, or not one this kit wrote."""


def mode_for_device(device: str) -> str:
    """The mode label a table shows for a device kind ("cuda" or "cpu")."""
    return GPU_MODE if device == "cuda" else CPU_SMOKE_MODE


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
    def from_traces(
        cls,
        traces: Iterable[Any],
        definition: Any,
        *,
        gpu_name: str | None = None,
        solution: str | None = None,
        author: str | None = None,
        device: str | None = None,
    ) -> RunResults:
        """Build the rows of one (definition, solution) run from its traces.

        ``definition`` is a ``Definition`` or its name. Traces of other definitions or (when
        ``solution`` is given) other solutions are ignored; when a workload has several traces,
        the last one wins (the newest run) and rows keep the order of first appearance. The
        device kind and the GPU come from the traces unless given. Roofline figures come from
        the definition's cost model when the GPU is known, else stay None.
        """
        name = trace_rows.definition_name(definition)
        chosen, solution = trace_rows.latest_traces(traces, name, solution)
        env = trace_rows.environment(chosen[-1]) if chosen else {}
        kind = device or trace_rows.device_kind(chosen)
        gpu = gpu_name or (env.get("hardware") if kind == "cuda" else None)
        roofline = RooflineView(name, gpu if kind == "cuda" else None)
        return cls(
            definition=name,
            solution=solution,
            author=author,
            device=kind,
            gpu_name=gpu,
            environment=env,
            rows=[trace_rows.row_from_trace(t, roofline) for t in chosen],
        )

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


def results_by_solution(
    traces: Iterable[Any],
    *,
    gpu_name: str | None = None,
    authors: dict[str, str] | None = None,
) -> list[RunResults]:
    """One :class:`RunResults` per (definition, solution) found in ``traces``, first-seen order.

    Example: ``for run in results_by_solution(trace_set_traces): print(run.solution)``
    """
    groups: dict[tuple[str, str | None], list[Any]] = {}
    for t in traces:
        if t.evaluation is None:
            continue
        groups.setdefault((t.definition, t.solution), []).append(t)
    authors = authors or {}
    return [
        RunResults.from_traces(
            group,
            definition,
            gpu_name=gpu_name,
            solution=solution,
            author=authors.get(solution) if solution else None,
        )
        for (definition, solution), group in groups.items()
    ]


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
