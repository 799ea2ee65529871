"""The ``benchmark`` category: run the definition's reference, as a solution, and its baseline
solutions through the kit's engine, with light settings (2 warm-up calls, 5 iterations, one
trial); every workload must pass for each.

On a GPU every workload runs; without one (no ``--disable-gpu`` on a CPU machine) the quick
subset runs on the CPU, correctness only, and the first message says so.
"""

from __future__ import annotations

from typing import Any

from fib_core.bench import Benchmark, BenchmarkConfig
from fib_core.data import Solution
from fib_core.data.traceset import TraceSet
from fib_core.dataset.selection import select_workloads
from fib_core.project.runflow import resolve_device
from fib_core.validate.checks import BASELINE_AUTHOR, error, failure, info
from fib_core.validate.context import DefinitionContext
from fib_core.validate.report import CheckMessage

LIGHT = {"warmup_runs": 2, "iterations": 5, "num_trials": 1}
REFERENCE_AUTHOR = "reference"


def reference_solution(definition: Any) -> Any:
    """The definition's ``reference`` code as a solution (value-returning, Python).

    >>> from fib_core.data import Definition  # doctest: +SKIP
    >>> reference_solution(d).spec.entry_point  # doctest: +SKIP
    'reference.py::run'
    """
    return Solution.from_dict({
        "name": f"{definition.name}__reference",
        "definition": definition.name,
        "author": REFERENCE_AUTHOR,
        "spec": {"language": "python", "target_hardware": ["cpu", "cuda"],
                 "entry_point": "reference.py::run", "destination_passing_style": False},
        "sources": [{"path": "reference.py", "content": definition.reference}],
    })


def check_benchmark(ctx: DefinitionContext, device: str = "auto") -> list[CheckMessage]:
    """Evaluate the reference and the baseline solutions of ``ctx`` on every workload."""
    d = ctx.definition
    if d is None:
        return [failure(f"{ctx.name}: cannot benchmark: the definition did not load; fix the "
                        "definition category's errors first")]
    records = [r.value for r in ctx.workloads if r.value is not None
               and r.value.is_workload_trace()]
    if not records:
        return [failure(f"{ctx.name}: cannot benchmark: no valid workloads; fix the workload "
                        "category's errors first")]
    kind = resolve_device(device)
    out = []
    if kind == "cpu":
        records = select_workloads(records, None, quick=True)
        out.append(info(f"no GPU: CPU smoke run of {len(records)} workloads (correctness only)"))
    files = {REFERENCE_AUTHOR: next(r.file for r in ctx.definition_records if r.value is not None)}
    solutions = [reference_solution(d)]
    for rec in ctx.solutions:
        if rec.value is not None and rec.value.author == BASELINE_AUTHOR:
            solutions.append(rec.value)
            files[rec.value.name] = rec.file
    trace_set = TraceSet(root=ctx.root, definitions={d.name: d}, solutions={d.name: solutions},
                         workloads={d.name: records})
    config = BenchmarkConfig(device=kind, definitions=(d.name,), **LIGHT)
    with Benchmark(trace_set, config) as bench:
        traces = bench.run_all(dump_traces=False)
    for sol in solutions:
        mine = [t for t in traces if t.solution == sol.name]
        failed = [t for t in mine if not t.is_successful()]
        label = "reference" if sol.author == REFERENCE_AUTHOR else f"baseline {sol.name}"
        if not failed:
            out.append(info(f"{label}: {len(mine)}/{len(mine)} workloads passed"))
            continue
        first = failed[0]
        log = (first.evaluation.log or "").strip().splitlines() if first.evaluation else []
        field = "reference" if sol.author == REFERENCE_AUTHOR else "sources"
        out.append(error(files.get(sol.name, sol.name), field, f"{label} failed {len(failed)} "
                         f"of {len(mine)} workloads (first: {first.workload.uuid}, "
                         f"{first.evaluation.status.value}"
                         f"{': ' + log[-1][:160] if log else ''})",
                         "fix it so that it passes the definition's own check"))
    return out
