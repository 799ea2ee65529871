"""The one benchmark flow behind ``run_local.py`` and ``run_modal.py``.

Both launchers do the same three steps, so they share this module instead of copies:

1. :func:`make_request` (local): config + CLI flags → a picklable :class:`RunRequest` holding
   the packed solution, the workload filters, the device and the engine settings, merged once
   by :func:`fib_core.bench.settings.merge` (the definition's eval.toml < the CPU smoke
   counts < config.toml < the flags given).
2. :func:`execute` (wherever the GPU is: this machine, or a Modal container): the dataset (the
   one already loaded, when local), select the workloads, take this shard's share, benchmark,
   return a :class:`ShardResult` (traces; plain JSON with :meth:`ShardResult.to_dict` when
   it crosses to another machine).
3. :func:`finish` (local): merge shards in workload order, print the table and summary,
   write ``--json``, show ``--compare``, and give the exit status (non-zero if anything failed).

Example (what ``run_local.py`` does)::

    ws = open_workspace("config.toml")
    opts = RunOptions(quick=True, flags={"iterations": 20})
    request = make_request(ws.cfg, ws.pack(), opts)
    shard = execute(request, trace_set=ws.trace_set)
    exit_code = finish([shard], ws.definition, opts)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fib_core.errors import ConfigError
from fib_core.project.selection import select_workloads

if TYPE_CHECKING:
    from collections.abc import Callable

    from fib_core.data import Solution, Trace, TraceSet
    from fib_core.project.config import KitConfig
    from fib_core.project.recording import RunRecording

# config.toml [build] keys that reach the compiler (fib_core.compile.BuildOptions)
# What each GPU's process of a several-GPU run runs (the engine imports it there by name,
# once that process's judge and worker are booting): this module's one-shard execution.
SHARD_TARGET = "fib_core.project.runflow:execute"
_BUILD_KEYS = ("cuda_arch", "extra_cuda_cflags", "extra_cflags", "extra_ldflags", "include_dirs")


@dataclass
class RunOptions:
    """What a launcher's command line set.

    ``flags``: the benchmark settings given on it, by setting name (``{"warmup_runs": 3,
    "workloads": ("batch_size=64",), "device": "cpu"}``; see :mod:`fib_core.bench.settings`,
    whose ``flags_given`` builds it); a setting left out was not given."""

    flags: dict[str, Any] = field(default_factory=dict)
    quick: bool = False
    json_path: Path | None = None
    compare_path: Path | None = None
    traces_path: Path | None = None  # also save the merged traces here (JSONL)
    compare_ref: str | None = None  # last | best | commit prefix, looked up in the ledger
    html_path: Path | None = None  # also write the HTML report here
    cross_check: bool = False  # also time each workload with every GPU timer
    ledger: bool = True  # record the run in runs/ledger.jsonl (run_local)
    recording: RunRecording | None = None  # built by the launcher from the four fields above
    wide: bool = False  # every table column, however wide the terminal
    source_dir: str | None = None  # the solution's folder, for tracebacks (solution/triton)
    contest: bool = False  # exactly the organizers' settings for the definition
    debug: Any = None  # run_local's debugging flags (fib_core.project.debug_tools)
    gpus: str | None = None  # "0,1", "1"; None = every visible GPU (run_local)
    profile_harness: bool = False  # print the per-phase breakdown after the run (run_local)
    results: Any = None  # set by finish(): the run's RunResults (a track run scores them)
    track: bool = False  # --track: every definition of the fork, then the track score
    watch: bool = False  # --watch: run again after each change to the solution or config
    strict: bool = False  # --strict: also fail errors large against the outputs' own scale


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
    device: str | None = None  # "cuda" | "cpu", resolved once by make_request
    dataset_path: str | None = None
    shard: int = 0
    num_shards: int = 1
    cross_check: bool = False  # also time each workload with every timer (GPU only)
    contest: bool = False
    # Several GPUs of this machine: the selection's positions in the order of the queue the
    # GPUs share (fib_core.bench.engine.work_queue); the shard takes its workloads from that queue.
    # None = this shard runs its round-robin share (``shard_of``).
    queue: list[int] | None = None
    # Also time the FlashInfer baseline on these workloads (cached), for the contest score.
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
    # (fib_core.baselines.measure.BaselineTimes as a dict); None: not asked (a CPU run).
    baseline: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        from fib_core.data import Trace  # imported here: pydantic (~150 ms), see execute

        self.traces = [Trace.from_dict(t) if isinstance(t, dict) else t for t in self.traces]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (traces as dicts), for a shard crossing to another machine."""
        return {**asdict(replace(self, traces=[])), "traces": [t.to_dict() for t in self.traces]}


def make_request(
    cfg: KitConfig, solution: Solution, opts: RunOptions, device: str | None = None
) -> RunRequest:
    """The request for ``solution``: workload filter, device and engine settings, merged once.

    ``device``: where it will run ("cuda" | "cpu"; None = resolve ``--device`` here). The
    definition's evaluation settings are the defaults; config.toml and flags override them.
    With ``opts.contest`` only the organizers' settings apply (a flag that would change them is
    refused, config.toml's are ignored; ``--seed`` still counts)."""
    # Imported here for start-up time (see execute).
    from fib_core.bench.grading import eval_settings
    from fib_core.bench.settings import BY_NAME, flag_name, merge

    kind = device or resolve_device(opts.flags.get("device"))
    filters = opts.flags.get("workloads", cfg.benchmark.workloads)
    settings = eval_settings(cfg.solution.definition)
    if opts.contest:
        if kind == "cpu":
            raise ConfigError(
                "--contest runs the organizers' GPU settings, and this run is on the CPU (a "
                "smoke run: correctness only); drop --contest here, or run it on a GPU machine"
            )
        clashing = [name for name in opts.flags if BY_NAME[name].per_definition]
        if clashing:
            raise ConfigError(
                f"{flag_name(clashing[0])} changes the organizers' settings that --contest "
                "runs; drop one of the two"
            )
        seed = {"seed": opts.flags["seed"]} if "seed" in opts.flags else {}
        engine = merge(definition=settings.contest_fields(), cpu=kind == "cpu", flags=seed)
    else:
        engine = merge(
            definition=settings.local_fields(),
            cpu=kind == "cpu",
            config=cfg.benchmark.given(),
            flags=opts.flags,
        )
    for name in ("workloads", "device"):  # the selection's and the request's own fields
        engine.pop(name, None)
    return RunRequest(
        solution=solution.to_dict(),
        definition=cfg.solution.definition,
        filters=list(filters) if filters else None,
        quick=opts.quick,
        engine=engine,
        build=build_settings(cfg),
        device=kind,
        cross_check=opts.cross_check,
        contest=opts.contest,
    )


def build_settings(cfg: KitConfig) -> dict[str, Any]:
    """BuildOptions fields from ``[build]``; include folders resolved against the fork's root."""
    settings = {k: getattr(cfg.build, k) for k in _BUILD_KEYS if getattr(cfg.build, k)}
    if "include_dirs" in settings:
        settings["include_dirs"] = [str((cfg.root / d).resolve()) for d in settings["include_dirs"]]
    return settings


def resolve_device(requested: str | None) -> str:
    """ "cuda" when a GPU is usable (or asked for), else "cpu"; asking for a missing GPU fails.

    The engine's own resolution (also used by its workers), reduced to the device kind.
    """
    # Imported here for start-up time: a launcher imports this module before it starts the
    # run's processes early, and asks for the device only after.
    from fib_core.bench.evaluation.environment import resolve_device as engine_device

    return engine_device(requested or "auto").split(":")[0]


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

    device = request.device or resolve_device(None)
    path, trace_set = _dataset(request, trace_set)
    mark("execute", "dataset")
    if request.definition not in trace_set.definitions:
        raise ConfigError(f"definition {request.definition} is not in the dataset at {path}")
    selection = select_for(request, trace_set, device)
    mine, stream = _shard_workloads(request, trace_set, selection, queue)
    config = _engine_config(request, device)
    solution = Solution.from_dict(request.solution)
    mark("execute", "selected")
    with Benchmark(trace_set, config) as bench:
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
    if device == "cuda" and request.baseline:
        from fib_core.baselines.measure import shard_baseline  # only runs that measure it

        result.baseline = shard_baseline(
            trace_set, request.definition, mine, traces, config, on_event=on_event
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
    from fib_core.project.dataset_checks import check_blobs

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


def _engine_config(request: RunRequest, device: str) -> Any:
    """The request's BenchmarkConfig on ``device``."""
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


def _dataset(request: RunRequest, trace_set: TraceSet | None) -> tuple[Path, TraceSet]:
    """The request's dataset folder, and its TraceSet (``trace_set`` when given)."""
    # Imported here for start-up time (see execute).
    from fib_core.data import TraceSet
    from fib_core.dataset import default_dataset_path

    path = Path(request.dataset_path) if request.dataset_path else default_dataset_path()
    return path, trace_set if trace_set is not None else TraceSet.from_path(path)


def execute_on_gpus(
    request: RunRequest,
    gpus: str | None,
    on_event: Callable[[Any], None] | None = None,
    trace_set: TraceSet | None = None,
) -> list[ShardResult]:
    """Benchmark on several GPUs of this machine (``gpus``: "0,1", "1", None = every visible
    one): one process per GPU, each taking workloads from a queue they share
    (:mod:`fib_core.bench.engine.gpus`, :mod:`fib_core.bench.engine.work_queue`). One
    GPU, or a CPU run, is :func:`execute` here (on ``trace_set`` when given); which of the two,
    the engine's :func:`~fib_core.bench.engine.gpus.gpus_for_run` says."""
    from fib_core.bench.engine import gpus as gpu_plan  # here for start-up time (see execute)

    ids = gpu_plan.gpus_for_run(request.device, gpus)
    if ids is None:
        return [execute(request, on_event=on_event, trace_set=trace_set)]
    _, trace_set = _dataset(request, trace_set)
    selection = select_for(request, trace_set, "cuda")
    plan = gpu_plan.plan_queue(request, selection, len(ids))
    return gpu_plan.run_on_gpus(plan, ids, on_event=on_event, target=SHARD_TARGET)
