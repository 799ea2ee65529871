"""The one benchmark flow behind ``run_local.py`` and ``run_modal.py``.

Both launchers do the same three steps, so they share this module instead of copies:

1. :func:`make_request` (local): config + CLI flags → a picklable :class:`RunRequest` holding
   the packed solution, the workload filters and the engine settings (CLI beats config.toml,
   which beats the engine's defaults).
2. :func:`execute` (wherever the GPU is: this machine, or a Modal container): load the
   dataset, select the workloads, take this shard's share, benchmark, return a
   :class:`ShardResult` of plain JSON-able traces.
3. :func:`finish` (local): merge shards in workload order, print the table and summary,
   write ``--json``, show ``--compare``, and give the exit status (non-zero if anything failed).

Example (what ``run_local.py`` does)::

    ws = open_workspace("config.toml")
    request = make_request(ws.cfg, ws.pack(), RunOptions(quick=True))
    shard = execute(request)
    exit_code = finish([shard], ws.definition, RunOptions(quick=True))
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fib_core.data.trace import EvaluationStatus
from fib_core.errors import ConfigError
from fib_core.project.selection import select_workloads

if TYPE_CHECKING:
    from collections.abc import Callable

    from fib_core.data import Definition, Solution, Trace
    from fib_core.project.config import KitConfig
    from fib_core.project.recording import RunRecording

# A CPU run only proves correctness; keep it short, but still catch a kernel that replays
# results: two input sets checked before timing, and the one timed call (on a third set)
# re-checked. The reference is not timed (a CPU has no score to compute), and the limit is
# sized for the Triton interpreter and the full-size references on a small machine.
CPU_SMOKE_TIMING = {
    "warmup_runs": 0,
    "iterations": 1,
    "num_trials": 1,
    "num_input_sets": 2,
    "profile_baseline": False,
    "timeout_seconds": 1800.0,
}

# config.toml [build] keys that reach the compiler (fib_core.compile.BuildOptions)
_BUILD_KEYS = ("cuda_arch", "extra_cuda_cflags", "extra_cflags", "extra_ldflags", "include_dirs")

# config.toml [benchmark] key -> BenchmarkConfig field
_CONFIG_TO_ENGINE = {
    "warmup": "warmup_runs",
    "iterations": "iterations",
    "trials": "num_trials",
    "timeout": "timeout_seconds",
    "atol": "atol",
    "rtol": "rtol",
    "required_matched_ratio": "required_matched_ratio",
    "seed": "seed",
    "timing_method": "timing_method",
    "isolated": "isolated",
}


@dataclass
class RunOptions:
    """What a launcher's command line may set; None means "not given"."""

    workloads: list[str] | None = None
    quick: bool = False
    warmup: int | None = None
    iterations: int | None = None
    trials: int | None = None
    timeout: float | None = None
    atol: float | None = None
    rtol: float | None = None
    required_matched_ratio: float | None = None
    seed: int | None = None
    timing_method: str | None = None
    isolated: bool | None = None
    device: str | None = None  # "cuda" | "cpu" | None (auto)
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


@dataclass
class RunRequest:
    """Everything a worker machine needs; plain data so it pickles across Modal."""

    solution: dict[str, Any]
    definition: str
    filters: list[str] | None
    quick: bool
    engine: dict[str, Any]
    build: dict[str, Any] = field(default_factory=dict)
    device: str | None = None
    dataset_path: str | None = None
    shard: int = 0
    num_shards: int = 1
    cross_check: bool = False  # also time each workload with every timer (GPU only)
    # The definition's evaluation settings (fib_core.bench.eval_settings), below ``engine``.
    defaults: dict[str, Any] = field(default_factory=dict)
    contest: bool = False
    # The uuids this shard runs (several GPUs spread by cost); None = round-robin ``shard_of``.
    assigned: list[str] | None = None

    def for_shard(self, index: int, count: int) -> RunRequest:
        return RunRequest(**{**asdict(self), "shard": index, "num_shards": count})


@dataclass
class ShardResult:
    """One shard's outcome: traces as JSON dicts, in the selection's order."""

    shard: int
    order: list[str]  # uuids of the whole selection, for merging in order
    traces: list[dict[str, Any]]
    device: str
    gpu_name: str | None
    messages: list[str] = field(default_factory=list)
    cross_check: list[dict[str, Any]] = field(default_factory=list)  # CrossCheckRow dicts
    cross_check_notes: list[str] = field(default_factory=list)  # e.g. "needs a CUDA GPU"
    total_workloads: int | None = None  # the definition's workloads in the dataset
    quick: bool = False  # the selection is the quick subset
    author: str | None = None


def engine_settings(cfg: KitConfig, opts: RunOptions) -> dict[str, Any]:
    """BenchmarkConfig fields: CLI flags win over config.toml, which wins over defaults."""
    settings: dict[str, Any] = {}
    for key, engine_key in _CONFIG_TO_ENGINE.items():
        from_cli = getattr(opts, key)
        from_cfg = getattr(cfg.benchmark, key)
        value = from_cli if from_cli is not None else from_cfg
        if value is not None:
            settings[engine_key] = value
    return settings


def make_request(cfg: KitConfig, solution: Solution, opts: RunOptions) -> RunRequest:
    """The request for ``solution``, with the workload filter from the CLI or config.toml.

    The definition's evaluation settings are the defaults; config.toml and flags override
    them. With ``opts.contest`` only the organizers' settings apply (a flag that would change
    them is refused, config.toml's are ignored)."""
    from fib_core.bench.eval_settings import eval_settings

    filters = opts.workloads if opts.workloads is not None else cfg.benchmark.workloads
    settings = eval_settings(cfg.solution.definition)
    if opts.contest:
        clashing = [key for key in _CONFIG_TO_ENGINE if key != "seed" and getattr(opts, key) is not None]
        if clashing:
            flag = "--" + clashing[0].replace("_", "-")
            raise ConfigError(f"{flag} changes the organizers' settings that --contest runs; "
                              "drop one of the two")
        defaults = settings.contest_fields()
        engine = {"seed": opts.seed} if opts.seed is not None else {}
    else:
        defaults = settings.local_fields()
        engine = engine_settings(cfg, opts)
    return RunRequest(
        solution=solution.to_dict(),
        definition=cfg.solution.definition,
        filters=list(filters) if filters else None,
        quick=opts.quick,
        engine=engine,
        build=build_settings(cfg),
        device=opts.device,
        cross_check=opts.cross_check,
        defaults=defaults,
        contest=opts.contest,
    )


def build_settings(cfg: KitConfig) -> dict[str, Any]:
    """BuildOptions fields from ``[build]``; include folders resolved against the fork's root."""
    settings = {k: getattr(cfg.build, k) for k in _BUILD_KEYS if getattr(cfg.build, k)}
    if "include_dirs" in settings:
        settings["include_dirs"] = [str((cfg.root / d).resolve()) for d in settings["include_dirs"]]
    return settings


def resolve_device(requested: str | None) -> str:
    """"cuda" when a GPU is usable (or asked for), else "cpu"; asking for a missing GPU fails.

    The engine's own resolution (also used by its workers), reduced to the device kind.
    """
    from fib_core.bench.worker import resolve_device as engine_device

    return engine_device(requested or "auto").split(":")[0]


def shard_of(items: list, index: int, count: int) -> list:
    """Round-robin share ``index`` of ``count``: big and small workloads spread evenly."""
    return items[index::count]


def select_for(request: RunRequest, trace_set: Any, device: str) -> list[Trace]:
    """The request's workloads, in dataset order (a CPU run keeps only the quick subset)."""
    from fib_core.dataset.roofline import workload_cost

    workloads = trace_set.workloads.get(request.definition, [])
    if not workloads:
        raise ConfigError(f"the dataset has no workloads for {request.definition}")

    def cost(t: Trace) -> float:
        c = workload_cost(request.definition, t.workload.axes)
        return float(c.bytes + c.flops)

    try:
        cost(workloads[0])
    except KeyError:  # no cost model for this definition: selection's own size proxy
        cost = None  # type: ignore[assignment]
    return select_workloads(
        workloads, request.filters, quick=request.quick or device == "cpu", cost=cost
    )


def engine_for(request: RunRequest, device: str) -> dict[str, Any]:
    """BenchmarkConfig fields for ``request`` on ``device``: the definition's settings, then
    (on CPU) the smoke-run counts, then what config.toml and the flags set."""
    engine = dict(request.defaults)
    if device == "cpu":  # a smoke run whatever the defaults; explicit settings still win
        engine.update(CPU_SMOKE_TIMING)
    engine.update(request.engine)
    return engine


def execute(
    request: RunRequest, on_event: Callable[[Any], None] | None = None
) -> ShardResult:
    """Benchmark the request's shard here and return its traces (runs on the GPU machine)."""
    from fib_core.bench import Benchmark, BenchmarkConfig
    from fib_core.data import Solution, TraceSet
    from fib_core.dataset import default_dataset_path

    device = resolve_device(request.device)
    path = Path(request.dataset_path) if request.dataset_path else default_dataset_path()
    trace_set = TraceSet.from_path(path)
    if request.definition not in trace_set.definitions:
        raise ConfigError(f"definition {request.definition} is not in the dataset at {path}")
    selection = select_for(request, trace_set, device)
    if request.assigned is not None:
        chosen = set(request.assigned)
        mine = [t for t in selection if t.workload.uuid in chosen]
    else:
        mine = shard_of(selection, request.shard, request.num_shards)
    from fib_core.project.dataset_checks import check_blobs

    check_blobs(trace_set, request.definition, [t.workload for t in mine])
    engine = engine_for(request, device)
    from fib_core.compile import BuildOptions

    config = BenchmarkConfig(device=device, build_options=BuildOptions(**request.build), **engine)
    solution = Solution.from_dict(request.solution)
    with Benchmark(trace_set, config) as bench:
        traces = bench.run_solution(solution, mine, on_event=on_event) if mine else []
    gpu = None
    if device == "cuda":
        import torch

        gpu = torch.cuda.get_device_name()
    result = ShardResult(
        shard=request.shard,
        order=[t.workload.uuid for t in selection],
        traces=[t.to_dict() for t in traces],
        device=device,
        gpu_name=gpu,
        total_workloads=len(trace_set.workloads.get(request.definition, [])),
        quick=request.quick or device == "cpu",
        author=solution.author,
    )
    if request.cross_check:
        from fib_core.bench.cross_check import cross_check_shard

        result.cross_check, result.cross_check_notes = cross_check_shard(
            request, mine, device, path
        )
    return result


def execute_on_gpus(
    request: RunRequest, gpus: str | None, on_event: Callable[[Any], None] | None = None
) -> list[ShardResult]:
    """Benchmark on several GPUs of this machine (``gpus``: "0,1", "1", None = every visible
    one): one process per GPU, workloads spread by cost (:mod:`fib_core.project.gpus`). One
    GPU, or a CPU run, is :func:`execute` here."""
    from fib_core.project import gpus as gpu_plan

    device = resolve_device(request.device)
    if device != "cuda":
        if gpus is not None:
            raise ConfigError("--gpus needs a CUDA GPU; this run is on the CPU")
        return [execute(request, on_event=on_event)]
    import torch

    chosen = gpu_plan.parse_gpus(gpus, torch.cuda.device_count())
    ids = gpu_plan.physical_ids(chosen)
    if len(chosen) == 1 and gpus is None:
        return [execute(request, on_event=on_event)]
    from fib_core.data import TraceSet
    from fib_core.dataset import default_dataset_path

    path = Path(request.dataset_path) if request.dataset_path else default_dataset_path()
    selection = select_for(request, TraceSet.from_path(path), device)
    costs = gpu_plan.workload_costs(request.definition, [t.workload.axes for t in selection])
    plans = gpu_plan.plan_shards(request, [t.workload.uuid for t in selection], costs, chosen)
    return gpu_plan.run_on_gpus(plans, ids, on_event=on_event)


def merge_shards(shards: list[ShardResult]) -> tuple[list[Trace], ShardResult]:
    """All shards' traces as Trace objects in selection order, and the first shard's facts."""
    from fib_core.data import Trace

    if not shards:
        raise ValueError("no shard results to merge")
    order = {uuid: i for i, uuid in enumerate(shards[0].order)}
    traces = [Trace.from_dict(d) for s in shards for d in s.traces]
    traces.sort(key=lambda t: order.get(t.workload.uuid, len(order)))
    return traces, shards[0]


def run_scope(first: ShardResult, ran: int) -> str | None:
    """ "3 of 54 workloads (quick subset, CPU smoke: correctness only)", or None if unknown."""
    if first.total_workloads is None:
        return None
    notes = []
    if first.quick:
        notes.append("quick subset")
    elif ran < first.total_workloads:
        notes.append("filtered")
    if first.device == "cpu":
        notes.append("CPU smoke: correctness only")
    text = f"{ran} of {first.total_workloads} workloads"
    return f"{text} ({', '.join(notes)})" if notes else text


def check_compare_file(opts: RunOptions) -> None:
    """Read ``--compare`` before the run: a wrong path must not cost a finished benchmark."""
    if opts.compare_path is not None:
        from fib_core.report.results import RunResults

        RunResults.from_json(opts.compare_path)


def finish(
    shards: list[ShardResult], definition: Definition, opts: RunOptions, console: Any = None
) -> int:
    """Print table and summary, write --json, show --compare; 0 only if every workload passed."""
    from rich.console import Console

    from fib_core.bench.trace_sink import write_or_fallback
    from fib_core.report.render import render_results
    from fib_core.report.results import RunResults

    console = console or Console()
    from fib_core.report.source_map import map_trace_logs

    traces, first = merge_shards(shards)
    map_trace_logs(traces, opts.source_dir)
    results = RunResults.from_traces(
        traces, definition, gpu_name=first.gpu_name, author=first.author
    )
    previous = None
    if opts.compare_path is not None:
        previous = RunResults.from_json(opts.compare_path)
    elif opts.recording is not None:
        previous = opts.recording.previous(results)
    opts.results = results
    render_results(
        results, console, compare=previous, scope=run_scope(first, len(traces)), wide=opts.wide
    )
    cross = [row for s in shards for row in s.cross_check]
    cross_notes = list(dict.fromkeys(n for s in shards for n in s.cross_check_notes))
    if cross or cross_notes:
        from fib_core.bench.cross_check import print_cross_check

        print_cross_check(cross, cross_notes, console)
    problems = []
    if opts.json_path is not None:
        written, problem = write_or_fallback(results.to_json, opts.json_path, "results")
        problems.append(problem)
        if problem is None:
            console.print(f"results written to {written}")
    if opts.traces_path is not None:
        from fib_core.data.json_io import append_jsonl

        def append(path: Path) -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            append_jsonl(path, traces)

        written, problem = write_or_fallback(append, opts.traces_path, "traces")
        problems.append(problem)
        if problem is None:
            console.print(f"traces appended to {written}")
    if opts.recording is not None:
        problems += opts.recording.keep(results, console, cross_check=cross)
    problems = [p for p in problems if p]
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    failed = [t for t in traces if t.evaluation is None or t.evaluation.status != EvaluationStatus.PASSED]
    if problems:
        return 2  # the measurements are kept, but not where the user asked
    return 1 if failed or not traces else 0
