"""The one benchmark flow behind ``run_local.py``, ``run_modal.py`` and the serve lanes.

The launchers do the same steps, so they share this module instead of copies:

1. :func:`make_request` (local): config + CLI flags → a picklable
   :class:`~fib_core.bench.engine.shard_run.RunRequest` holding the packed solution, the
   workload filters, the device and the engine settings, merged once by
   :func:`fib_core.bench.settings.merge` (the definition's eval.toml < the CPU smoke counts <
   config.toml < the flags given).
2. :func:`execute` (wherever the GPU is: this machine, a Modal container, a serve lane): the
   engine's one-shard run (:func:`fib_core.bench.engine.shard_run.execute`: select, take this
   shard's share, benchmark), then, on a GPU, the FlashInfer baseline on the same workloads
   for the contest score; a :class:`~fib_core.bench.engine.shard_run.ShardResult` (plain JSON
   with ``to_dict`` when it crosses to another machine). :func:`execute_on_gpus` is the same
   on the GPUs of this machine: the engine fans the shard out
   (:func:`fib_core.bench.engine.gpus.execute_on_gpus`), then the baseline is measured here
   once, on the whole selection.
3. :func:`~fib_core.project.run_finish.finish` (local): merge shards in workload order, print
   the table and summary, write ``--json``, show ``--compare``, and give the exit status
   (non-zero if anything failed).

The calls go down only: this module calls the engine and the baselines, the engine calls
neither back.

Example (what ``run_local.py`` does)::

    ws = open_workspace("config.toml")
    opts = RunOptions(quick=True, flags={"iterations": 20})
    request = make_request(ws.cfg, ws.pack(), opts)
    shards = execute_on_gpus(request, None, trace_set=ws.trace_set)
    exit_code = finish(shards, ws.definition, opts)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fib_core.bench.engine.shard_run import RunRequest, ShardResult, engine_config, load_dataset
from fib_core.bench.engine.shard_run import execute as execute_shard
from fib_core.environ import scoped_environ
from fib_core.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from fib_core.data import Solution, TraceSet
    from fib_core.project.config import KitConfig
    from fib_core.project.recording import RunRecording

# config.toml [build] keys that reach the compiler (fib_core.compile.BuildOptions)
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


def execute(
    request: RunRequest,
    on_event: Callable[[Any], None] | None = None,
    trace_set: TraceSet | None = None,
) -> ShardResult:
    """The request's shard benchmarked here (the engine's one-shard run), and on a GPU the
    FlashInfer baseline's figures on the same workloads (``ShardResult.baseline``, cached per
    GPU model and FlashInfer version), for the contest score.

    ``trace_set``: the request's dataset when the caller has it loaded already (a local run, a
    serve lane); None loads ``request.dataset_path`` (a Modal container).

    Example: ``execute(request.for_shard(1, 4))`` in one of four Modal containers."""
    _, trace_set = load_dataset(request, trace_set)
    shard = execute_shard(request, on_event=on_event, trace_set=trace_set)
    if shard.device == "cuda" and request.baseline:
        mine = _records(trace_set, request.definition, [t.workload.uuid for t in shard.traces])
        shard.baseline = _baseline(request, trace_set, mine, shard.traces, "cuda", on_event)
    return shard


def execute_on_gpus(
    request: RunRequest,
    gpus: str | None,
    on_event: Callable[[Any], None] | None = None,
    trace_set: TraceSet | None = None,
) -> list[ShardResult]:
    """Benchmark on the GPUs of this machine ``gpus`` names ("0,1", "1", None = every visible
    one; a CPU run, or one GPU nobody named, runs in this process): the engine's fan-out
    (:func:`fib_core.bench.engine.gpus.execute_on_gpus`), then on a GPU the FlashInfer baseline
    measured here once, on the whole selection, on the first of those GPUs; its figures go
    with the first shard (``finish`` merges the shards' figures).

    Example: ``finish(execute_on_gpus(request, "0,1", trace_set=ws.trace_set), definition,
    opts)``."""
    # Imported here for start-up time: the engine's processes module loads pydantic and the
    # pool (~0.5 s), and a launcher imports this module before it starts them early.
    from fib_core.bench.engine.gpus import execute_on_gpus as fan_out
    from fib_core.bench.engine.gpus import first_gpu

    _, trace_set = load_dataset(request, trace_set)
    shards = fan_out(request, gpus, on_event=on_event, trace_set=trace_set)
    if shards[0].device == "cuda" and request.baseline:
        traces = [t for s in shards for t in s.traces]
        with _only_gpu(first_gpu(gpus)):
            selection = _records(trace_set, request.definition, shards[0].order)
            shards[0].baseline = _baseline(request, trace_set, selection, traces, "cuda",
                                           on_event)
    return shards


@contextmanager
def _only_gpu(visible: str | None) -> Iterator[None]:
    """While inside, processes started from here see only GPU ``visible`` (a
    ``CUDA_VISIBLE_DEVICES`` entry; None: as this process sees them)."""
    with scoped_environ({"CUDA_VISIBLE_DEVICES": visible} if visible is not None else {}):
        yield


def _records(trace_set: TraceSet, definition: str, uuids: list[str]) -> list[Any]:
    """The dataset's workload records of ``uuids``, in that order: the workloads the engine
    ran, named by its results (no second selection that could differ from the engine's).
    The engine ran them from this dataset, so each uuid is in it."""
    by_uuid = {t.workload.uuid: t for t in trace_set.workloads.get(definition, [])}
    return [by_uuid[u] for u in uuids]


def _baseline(request: RunRequest, trace_set: TraceSet, workloads: list, traces: list,
              device: str, on_event: Callable[[Any], None] | None) -> dict[str, Any]:
    """The FlashInfer baseline's figures on ``workloads`` (their records), measured on
    ``device`` with the request's settings where the cache lacks them; the GPU model is the
    one ``traces`` (the solution's) were measured on."""
    # Imported here for start-up time: the baselines load the engine (torch); only a GPU run
    # that asks for the contest score measures them.
    from fib_core.baselines.measure import shard_baseline

    return shard_baseline(trace_set, request.definition, workloads, traces,
                          engine_config(request, device), on_event=on_event)
