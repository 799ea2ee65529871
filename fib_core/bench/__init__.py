"""fib_core.bench — the benchmark engine: inputs -> reference -> check -> timing, in workers.

The launching process is :mod:`.engine`, what runs in a worker and the judge is
:mod:`.evaluation`, what a solution may reach is :mod:`.containment`; this package is their
public face.

Public API (other packages and launchers rely on these names)::

    from fib_core.bench import Benchmark, BenchmarkConfig

    with Benchmark(trace_set, BenchmarkConfig(iterations=20), on_event=print) as bench:
        traces = bench.run_all(dump_traces=True, resume=False)          # list[Trace]
        traces = bench.run_solution(solution, workloads=None, on_event=cb)  # list[Trace]

The organizers' reference-listing form works too (:mod:`.benchmark`): ``bench =
Benchmark(trace_set, log_level="INFO"); bench.run(config); bench.flush()`` or
``results = bench.evaluate(config)`` (a TraceSet). Their runner shapes are in :mod:`.runner`
(``Runner``, ``BaselineHandle``...) and :mod:`.runners.mp_runner` (``MultiProcessRunner``).

- ``BenchmarkConfig`` (frozen dataclass, :mod:`.config`): warmup_runs=10, iterations=50,
  num_trials=3, atol/rtol/required_matched_ratio=None (None = the definition's default),
  timeout_seconds=300, isolated=False, device="auto"|"cuda"|"cpu", seed=0,
  timing_method="auto"|"cupti"|"profiler"|"events"|"wall-clock", num_input_sets=4,
  definitions/solutions/workloads filters (None = all), profile_baseline=True,
  allow_input_mutation=False, generator_modules=() (imported in each worker),
  input_memory_fraction=0.4, reference_time_budget_s=20, build_options=None (a
  ``fib_core.compile.BuildOptions`` passed to ``build``), extra={}. ``with_overrides(**set_flags)``
  applies only the values that are not None (CLI flags that were set).
- ``Benchmark.run_solution(solution, workloads=None, progress=None, *, on_event=None,
  dump_traces=False, resume=False)``: ``workloads`` are workload records (Trace) or Workloads.
- Events passed to ``on_event`` in the parent (:mod:`.events`): ``SolutionStarted(solution,
  definition, total)``, ``WorkloadStarted(uuid, index, total, solution)``,
  ``WorkloadFinished(trace, index, total)``, ``WorkloadSkipped(uuid, solution, index, total)``,
  ``Log(message, level)``.
- Inputs (:mod:`.evaluation.inputs`): ``generate_inputs(definition, workload, *, seed, device,
  dataset_root, input_set=0, blob_cache=None) -> list``; ``generate_timing_sets(definition,
  workload, *, seed, device, dataset_root, first, count) -> list[list]`` (sets that are timed,
  never checked: drawn many at once when the generator takes ``sets``);
  ``register_input_generator(name)`` decorating ``fn(definition, axes, gen, device) ->
  dict[str, Tensor]``.
- Correctness (:mod:`.evaluation.check`, :mod:`.evaluation.tolerance`, over the shared words
  of :mod:`fib_core.checking`): ``Tolerance``,
  ``resolve_tolerance(definition, config)``
  (defaults -> op_type -> definition ``"tolerance": {...}`` key -> config), ``check_outputs``,
  ``CheckResult(status, correctness, message)``, ``register_checker(name)`` (a definition name
  or a ``"checker"`` kind declared in the definition JSON).

Trace extras written by the engine: ``evaluation`` gets seed, device ("cuda"/"cpu"),
solution_hash, runner, tolerance, num_input_sets, warnings, clocks, harness_seconds,
mutated_inputs and, on CPU, ``"timing": "wall-clock, not comparable"``; ``performance`` gets
timing_method, warmup_runs, iterations, num_trials, spread {overall, trials: [min, p10, median,
p90, max, mean, std]}, timing_warnings and reference_timing; ``correctness.extra`` gets the
checker, tolerance and per-output mismatch statistics.

Importing this package does not import torch; the engine's heavy modules load on first use.
"""

from __future__ import annotations

from fib_core._lazy import lazy_attributes
from fib_core.bench.config import BenchmarkConfig
from fib_core.bench.events import (
    Log,
    SolutionStarted,
    WorkloadFinished,
    WorkloadSkipped,
    WorkloadStarted,
)

__all__ = [
    "Benchmark",
    "BenchmarkConfig",
    "CheckResult",
    "Log",
    "SolutionStarted",
    "Tolerance",
    "WorkloadFinished",
    "WorkloadSkipped",
    "WorkloadStarted",
    "check_outputs",
    "generate_inputs",
    "generate_timing_sets",
    "register_checker",
    "register_input_generator",
    "resolve_tolerance",
]

_LAZY = {
    "Benchmark": "fib_core.bench.benchmark",
    "CheckResult": "fib_core.checking",
    "Tolerance": "fib_core.checking",
    "check_outputs": "fib_core.bench.evaluation.check",
    "register_checker": "fib_core.bench.evaluation.check",
    "resolve_tolerance": "fib_core.bench.evaluation.tolerance",
    "generate_inputs": "fib_core.bench.evaluation.inputs",
    "generate_timing_sets": "fib_core.bench.evaluation.inputs",
    "register_input_generator": "fib_core.bench.evaluation.inputs",
}


__getattr__ = lazy_attributes(__name__, _LAZY)
