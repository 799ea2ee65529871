"""The FlashInfer baseline's latency on each workload of a run, measured where the run measures.

After a solution's run on a GPU, :func:`baseline_times` looks up the baseline's latency on the
same workloads in the cache (:mod:`fib_core.baselines.cache`) and measures the ones it lacks
through the same engine, with the same settings, as the solution was timed (the baseline is an
ordinary Python solution; only the reference is not timed again, and a baseline whose kernel
updates an input in place, as the contest's GDN decode baseline does, is allowed to). A
baseline that cannot run here (its kernels need another GPU, or a package is missing) is not
tried: the result says why and what to do.

Example (what the launcher, ``fib_core.project.runflow``, does after the solution's run)::

    times = baseline_times(trace_set, "gdn_decode_qk4_v8_d128_k_last", selection, traces, config)
    times.latencies       # {uuid: ms} of the workloads the baseline passed
    times.reason          # None, or why there is no baseline figure on this machine
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fib_core.baselines.cache import BaselineCache
from fib_core.baselines.catalog import baseline_for, capability_of
from fib_core.bench import Benchmark
from fib_core.errors import FibError

# Failures that say something about the baseline on these inputs, so they are kept; the others
# (a missing library, a build error, a timeout) are environment trouble and are tried again.
LASTING_FAILURES = ("INCORRECT_NUMERICAL", "INCORRECT_SHAPE", "INCORRECT_DTYPE")


@dataclass
class BaselineTimes:
    """What one shard learnt about its definition's baseline (plain data: it crosses Modal).

    ``latencies``: uuid -> the baseline's latency (ms) where it passed; ``failed``: uuid ->
    "STATUS: reason" where it did not; ``reason``: why nothing was measured (None if it ran);
    ``measured``: how many workloads were timed now rather than read from the cache (a
    workload whose baseline failed was not timed); ``kept``: how many of this run's results
    went into the cache (latencies and the failures that would recur; a build error or a
    timeout is tried again next run).
    """

    definition: str
    baseline: str | None = None
    latencies: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    reason: str | None = None
    gpu: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    measured: int = 0
    kept: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BaselineTimes:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def run_environment(traces: list[Any]) -> tuple[str | None, tuple[int, int] | None]:
    """The GPU name and compute capability the solution's traces were measured on."""
    for trace in traces:
        env = trace.evaluation.environment if trace.evaluation is not None else None
        if env is not None and env.hardware:
            return env.hardware, capability_of(env.libs.get("compute_capability"))
    return None, None


def baseline_times(
    trace_set: Any,
    definition: str,
    workloads: list[Any],
    traces: list[Any],
    config: Any,
    on_event: Callable[[Any], None] | None = None,
) -> BaselineTimes:
    """The baseline's latencies on ``workloads`` (workload records), from the cache or measured
    now with ``config`` (the solution's BenchmarkConfig) on the GPU ``traces`` ran on;
    ``on_event`` gets the engine's events of that measurement (a progress bar counts them)."""
    baseline = baseline_for(definition)
    if baseline is None:
        return BaselineTimes(definition, reason=f"the contest has no FlashInfer baseline for "
                                                f"{definition}")
    gpu, capability = run_environment(traces)
    times = BaselineTimes(definition, baseline=baseline.name, gpu=gpu)
    times.reason = baseline.unavailable_reason(capability, gpu)
    if times.reason is not None:
        return times
    times.versions = baseline.versions()
    solution = baseline.solution()
    cache = BaselineCache.for_run(
        definition, baseline.name, solution.hash(), gpu or "unknown GPU", times.versions,
        dataclasses.asdict(config),
    )
    known = cache.load()
    missing = [w for w in workloads if w.workload.uuid not in known]
    if missing:
        fresh = _measure(trace_set, solution, missing, config, baseline.mutates_inputs, on_event)
        times.measured = sum("latency_ms" in entry for entry in fresh.values())
        lasting = {u: e for u, e in fresh.items()
                   if "latency_ms" in e or e.get("status") in LASTING_FAILURES}
        try:
            kept = cache.save({**cache.load(), **lasting})  # re-read: another GPU may add some
        except OSError as err:
            kept = None
            times.notes.append(f"{cache.path}: cannot keep the baseline latencies "
                               f"({err.strerror or err}); they are measured again next run")
        if kept is None and not times.notes:
            times.notes.append("no cache key here: the baseline latencies are measured again "
                               "next run")
        times.kept = len(lasting) if kept is not None else 0
        known = {**known, **fresh}
    for w in workloads:
        entry = known.get(w.workload.uuid)
        if entry is None:
            continue
        if "latency_ms" in entry:
            times.latencies[w.workload.uuid] = float(entry["latency_ms"])
        else:
            times.failed[w.workload.uuid] = f"{entry['status']}: {entry.get('reason') or ''}"
    return times


def _measure(
    trace_set: Any,
    solution: Any,
    workloads: list[Any],
    config: Any,
    mutates_inputs: bool,
    on_event: Callable[[Any], None] | None,
) -> dict[str, dict[str, Any]]:
    """Time the baseline on ``workloads`` through the engine: uuid -> cache entry."""
    settings = dataclasses.replace(
        config,
        profile_baseline=False,  # the reference's time is not needed again
        allow_input_mutation=config.allow_input_mutation or mutates_inputs,
    )
    with Benchmark(trace_set, settings) as bench:
        traces = bench.run_solution(solution, workloads, on_event=on_event)
    entries: dict[str, dict[str, Any]] = {}
    for trace in traces:
        ev = trace.evaluation
        if ev is None:
            continue
        perf = ev.performance
        if ev.passed and perf is not None and perf.is_valid:
            entries[trace.workload.uuid] = {"latency_ms": perf.latency_ms}
        else:
            reason = (ev.log or "").strip().splitlines()
            entries[trace.workload.uuid] = {
                "status": ev.status.value,
                "reason": reason[-1][:300] if reason else "",
            }
    return entries


def shard_baseline(
    trace_set: Any,
    definition: str,
    workloads: list[Any],
    traces: list[Any],
    config: Any,
    on_event: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """:func:`baseline_times` as plain data for a ShardResult. A failure to measure the
    baseline (an unusable installation) becomes its reason: the solution's own figures stand."""
    try:
        times = baseline_times(trace_set, definition, workloads, list(traces), config, on_event)
        return times.to_dict()
    except (FibError, OSError, RuntimeError, ImportError) as err:
        first = str(err).strip().splitlines()
        why = first[0] if first else type(err).__name__
        return BaselineTimes(definition, reason=f"the baseline could not be measured: {why}").to_dict()
