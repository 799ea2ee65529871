"""One shard of a run, executed here: the request's workloads selected, this shard's share
taken (or the stream of the queue several GPUs share), the blobs checked, the solution
benchmarked, the traces returned as a :class:`ShardResult`.

This is the engine's end of a run request. A launcher builds the :class:`RunRequest` (from
its config and flags) and hands it down: to :func:`execute` on one GPU, the CPU, a Modal
container or a serve lane, or to :func:`fib_core.bench.engine.gpus.execute_on_gpus`, whose
per-GPU processes (:mod:`.gpu_processes`) run :func:`execute` each. Nothing here calls back
up: what a launcher adds to a shard (the FlashInfer baseline's figures) it adds to the result
it gets back.

Example (a CPU run of a packed solution on the embedded dataset)::

    request = RunRequest(solution=solution.to_dict(), definition=solution.definition,
                         filters=None, quick=True, engine={}, device="cpu")
    shard = execute(request)
    [t.evaluation.status for t in shard.traces]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fib_core.dataset import default_dataset_path
from fib_core.dataset.checks import check_blobs
from fib_core.dataset.selection import select_workloads
from fib_core.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from fib_core.data import Trace, TraceSet


@dataclass
class RunRequest:
    """Everything a worker machine needs; plain data so it pickles across Modal."""

    solution: dict[str, Any]
    definition: str
    filters: list[str] | None
    quick: bool
    # BenchmarkConfig fields above its defaults: every layer merged (fib_core.bench.settings).
    engine: dict[str, Any]
    build: dict[str, Any] = field(default_factory=dict)
    device: str | None = None  # "cuda" | "cpu", resolved once by the launcher
    dataset_path: str | None = None
    shard: int = 0
    num_shards: int = 1
    cross_check: bool = False  # also time each workload with every timer (GPU only)
    contest: bool = False
    # Several GPUs of this machine: the selection's positions in the order of the queue the
    # GPUs share (fib_core.bench.engine.work_queue); the shard takes its workloads from that queue.
    # None = this shard runs its round-robin share (``shard_of``).
    queue: list[int] | None = None
    # Also time the FlashInfer baseline on these workloads (cached), for the contest score:
    # the launcher does, after the engine's run.
    baseline: bool = True

    def for_shard(self, index: int, count: int) -> RunRequest:
        return RunRequest(**{**asdict(self), "shard": index, "num_shards": count})

    def uses_quick_subset(self, device: str | None) -> bool:
        """The quick subset: asked for (``--quick``), or a CPU run whose workloads nobody
        named (the CPU smoke run's default; workloads named by ``--workloads`` or config.toml
        still win)."""
        return self.quick or (device == "cpu" and not self.filters)


@dataclass
class ShardResult:
    """One shard's outcome: its traces, and what the table needs to know about the run.

    ``traces`` may be given as JSON dicts (a shard back from another machine): they are read
    into :class:`~fib_core.data.Trace` objects on construction."""

    shard: int
    order: list[str]  # uuids of the whole selection, for merging in order
    traces: list[Any]  # Trace
    device: str
    gpu_name: str | None
    messages: list[str] = field(default_factory=list)
    cross_check: list[dict[str, Any]] = field(default_factory=list)  # CrossCheckRow dicts
    cross_check_notes: list[str] = field(default_factory=list)  # e.g. "needs a CUDA GPU"
    total_workloads: int | None = None  # the definition's workloads in the dataset
    quick: bool = False  # the selection is the quick subset
    author: str | None = None
    # The FlashInfer baseline's latencies on this shard's workloads, or why there are none
    # (the baselines' BaselineTimes as a dict), set by the launcher; None: not
    # asked (a CPU run). A several-GPU run's first shard carries the whole selection's.
    baseline: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        from fib_core.data import Trace  # imported here: pydantic (~150 ms), see execute

        self.traces = [Trace.from_dict(t) if isinstance(t, dict) else t for t in self.traces]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (traces as dicts), for a shard crossing to another machine."""
        return {**asdict(replace(self, traces=[])), "traces": [t.to_dict() for t in self.traces]}


def shard_of(items: list, index: int, count: int) -> list:
    """Round-robin share ``index`` of ``count``: big and small workloads spread evenly."""
    return items[index::count]


def select_for(request: RunRequest, trace_set: Any, device: str) -> list[Trace]:
    """The request's workloads, in dataset order (see :meth:`RunRequest.uses_quick_subset`;
    an untagged dataset's quick subset is the smallest by the definition's roofline size)."""
    workloads = trace_set.workloads.get(request.definition, [])
    if not workloads:
        raise ConfigError(f"the dataset has no workloads for {request.definition}")
    return select_workloads(
        workloads,
        request.filters,
        quick=request.uses_quick_subset(device),
        definition=request.definition,
    )


def device_kind(request: RunRequest) -> str:
    """The request's device kind ("cuda" | "cpu"): its own, or this machine's when unset."""
    if request.device:
        return request.device
    # Imported here for start-up time: a launcher imports this module before it hands over,
    # and this one imports torch.
    from fib_core.bench.evaluation.environment import resolve_device

    return resolve_device("auto").split(":")[0]


def execute(
    request: RunRequest,
    on_event: Callable[[Any], None] | None = None,
    trace_set: TraceSet | None = None,
    queue: Any = None,
) -> ShardResult:
    """Benchmark the request's shard here and return its traces (runs on the GPU machine).

    ``trace_set``: the request's dataset when the caller has it loaded already (a local run);
    None loads ``request.dataset_path`` (another machine, another process). ``queue``: this
    GPU's :class:`fib_core.bench.engine.work_queue.QueueTaker`, for a request with ``queue`` set."""
    # Imported here for start-up time: a launcher imports this module before it hands over.
    from fib_core.bench import Benchmark
    from fib_core.bench.evaluation.timeline import mark
    from fib_core.data import Solution

    device = device_kind(request)
    path, trace_set = load_dataset(request, trace_set)
    mark("execute", "dataset")
    if request.definition not in trace_set.definitions:
        raise ConfigError(f"definition {request.definition} is not in the dataset at {path}")
    selection = select_for(request, trace_set, device)
    mine, stream = _shard_workloads(request, trace_set, selection, queue)
    solution = Solution.from_dict(request.solution)
    mark("execute", "selected")
    with Benchmark(trace_set, engine_config(request, device)) as bench:
        if stream is not None:
            traces = bench.run_solution(solution, stream, on_event=on_event)
            mine = stream.taken
        else:
            traces = bench.run_solution(solution, mine, on_event=on_event) if mine else []
    mark("execute", "closed")
    # The GPU's name as the judge recorded it: this process may have no CUDA context, and
    # making one to ask costs about half a second at the end of every run.
    gpu = next((t.evaluation.environment.hardware for t in traces
                if t.evaluation is not None), None) if device == "cuda" else None
    result = ShardResult(
        shard=request.shard,
        order=[t.workload.uuid for t in selection],
        traces=list(traces),
        device=device,
        gpu_name=gpu,
        total_workloads=len(trace_set.workloads.get(request.definition, [])),
        quick=request.uses_quick_subset(device),
        author=solution.author,
    )
    if request.cross_check:
        from fib_core.bench.cross_check import cross_check_shard  # only --cross-check runs

        result.cross_check, result.cross_check_notes = cross_check_shard(
            request, mine, device, path
        )
    return result


def _shard_workloads(request: RunRequest, trace_set: Any, selection: list, queue: Any
                     ) -> tuple[list, Any]:
    """This shard's workloads (its round-robin share), or, with a queue the GPUs share, none
    yet and the stream that takes them from the queue; their blobs checked first."""
    # Imported here for start-up time (see execute).
    from fib_core.bench.engine.stream import WorkloadStream

    if request.queue is None:
        mine = shard_of(selection, request.shard, request.num_shards)
        check_blobs(trace_set, request.definition, [t.workload for t in mine])
        return mine, None
    if queue is None:
        raise ValueError("a request with a shared queue's order needs that queue")
    if sorted(request.queue) != list(range(len(selection))):
        raise ValueError("the shared queue's order is not this shard's selection")
    check_blobs(trace_set, request.definition, [t.workload for t in selection])
    return [], WorkloadStream([selection[i] for i in request.queue], queue)


def engine_config(request: RunRequest, device: str) -> Any:
    """The request's BenchmarkConfig on ``device`` ("cuda", "cuda:1", "cpu"): what its shard
    runs with, and what a measurement after it (the launcher's baseline) runs with too."""
    # Imported here for start-up time (see execute).
    from fib_core.bench import BenchmarkConfig
    from fib_core.compile import BuildOptions

    engine = dict(request.engine)
    extra = dict(engine.pop("extra", None) or {})
    if request.contest:  # the reference timed as the judge does (its counts, a set per trial)
        extra["reference_protocol"] = "judge"
    return BenchmarkConfig(
        device=device, build_options=BuildOptions(**request.build), extra=extra, **engine
    )


def load_dataset(request: RunRequest, trace_set: TraceSet | None) -> tuple[Path, TraceSet]:
    """The request's dataset folder, and its TraceSet (``trace_set`` when given)."""
    from fib_core.data import TraceSet  # imported here for start-up time (see execute)

    path = Path(request.dataset_path) if request.dataset_path else default_dataset_path()
    return path, trace_set if trace_set is not None else TraceSet.from_path(path)
