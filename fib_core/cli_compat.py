"""The organizers' command functions (``fib_core.cli.main``), over the kit's command line.

Code written for flashinfer-bench calls ``run(args)``, ``summary(args)``, ``best(args)``,
``merge(args)``, ``visualize(args)`` with an ``argparse.Namespace`` carrying that tool's flags
(``local``, ``warmup_runs``, ``iterations``, ``num_trials``, ``rtol``, ``atol``,
``use_isolated_runner``, ``save_results``, ``log_level``, ``definitions``, ``solutions``,
``output``...). Each turns the flags it finds into the kit's command line and runs
:func:`fib_core.cli.main`, returning its exit status (0 ok, 1 a workload failed, 2 a usage or
data mistake). ``merge_tracesets`` and ``export_traceset`` work on TraceSet objects.

    >>> import argparse
    >>> from fib_core.cli.main import summary
    >>> summary(argparse.Namespace(local=["my-dataset"]))   # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from fib_core.commands import cli as cli  # the console entry point, defined with the kit's CLI
from fib_core.commands import main
from fib_core.errors import FibError

# Namespace attribute -> kit flag, for the value flags of ``run``.
_RUN_VALUES = {
    "warmup_runs": "--warmup-runs",
    "iterations": "--iterations",
    "num_trials": "--num-trials",
    "rtol": "--rtol",
    "atol": "--atol",
    "required_matched_ratio": "--required-matched-ratio",
    "timeout": "--timeout",
    "timeout_seconds": "--timeout",
    "device": "--device",
    "seed": "--seed",
    "log_level": "--log-level",
}
_RUN_LISTS = {
    "definitions": "--definitions",
    "solutions": "--solutions",
    "workloads": "--workloads",
}


def _paths(args: argparse.Namespace, name: str = "local") -> list[str]:
    value = getattr(args, name, None)
    if value is None:
        return []
    if isinstance(value, (str, Path)):
        return [str(value)]
    return [str(v) for v in value]


def _local_flags(args: argparse.Namespace) -> list[str]:
    return [x for p in _paths(args) for x in ("--local", p)]


def _kit_main(argv: Sequence[str]) -> int:
    return main(list(argv))


def run_argv(args: argparse.Namespace) -> list[str]:
    """The kit command line equivalent to the organizers' ``run`` flags in ``args``."""
    argv = ["run", *_local_flags(args)]
    for attr, flag in _RUN_VALUES.items():
        value = getattr(args, attr, None)
        if value is not None:
            argv += [flag, str(value)]
    for attr, flag in _RUN_LISTS.items():
        value = getattr(args, attr, None)
        if value:
            argv += [flag, *([value] if isinstance(value, str) else [str(v) for v in value])]
    if getattr(args, "use_isolated_runner", None) or getattr(args, "isolated", None):
        argv.append("--isolated")
    if getattr(args, "resume", None):
        argv.append("--resume")
    save = getattr(args, "save_results", None)
    if save is not None:
        argv.append("--save-results" if save else "--no-save-results")
    return argv


def run(args: argparse.Namespace) -> int:
    """Benchmark the solutions of the datasets in ``args.local`` (the kit's ``run``)."""
    return _kit_main(run_argv(args))


def summary(args: argparse.Namespace) -> int:
    """Print the contest standing of every solution with traces (``report summary``)."""
    return _kit_main(["report", "summary", *_local_flags(args)])


def best(args: argparse.Namespace) -> int:
    """Print the fastest passing solution of each workload (``report best``)."""
    return _kit_main(["report", "best", *_local_flags(args)])


def visualize(args: argparse.Namespace) -> int:
    """The kit draws no charts: prints the standing table (``report summary``) instead."""
    return summary(args)


def merge(args: argparse.Namespace) -> int:
    """Merge the dataset folders in ``args.local`` into ``args.output`` (``report merge``)."""
    output = getattr(args, "output", None)
    if output is None:
        raise FibError("merge: no output folder; set args.output")
    return _kit_main(["report", "merge", *_local_flags(args), "--output", str(output)])


def merge_tracesets(trace_sets: Iterable[Any]) -> Any:
    """One in-memory TraceSet holding everything of ``trace_sets``, duplicates once.

    The same definition or solution name with different content is a ``ValueError``.
    """
    # Imported here: keeps pydantic (~50 ms to load) out of `import fib_core.cli`.
    from fib_core.data.traceset import TraceSet

    merged = TraceSet()
    seen_workloads: set[tuple[str, str]] = set()
    seen_traces: set[str] = set()
    for ts in trace_sets:
        for definition in ts.definitions.values():
            known = merged.definitions.get(definition.name)
            if known is None:
                merged.add_definition(definition)
            elif known.content_hash() != definition.content_hash():
                raise ValueError(f"definition {definition.name!r} differs between the trace sets")
        for sols in ts.solutions.values():
            for sol in sols:
                known_sol = merged.get_solution(sol.name)
                if known_sol is None:
                    merged.add_solution(sol)
                elif known_sol.to_dict() != sol.to_dict():
                    raise ValueError(f"solution {sol.name!r} differs between the trace sets")
        for records in ts.workloads.values():
            fresh = []
            for record in records:
                key = (record.definition, record.workload.uuid)
                if key not in seen_workloads:
                    seen_workloads.add(key)
                    fresh.append(record)
            merged.add_workload_traces(fresh)
        for traces in ts.traces.values():
            fresh = []
            for trace in traces:
                key = json.dumps(trace.to_dict(), sort_keys=True)
                if key not in seen_traces:
                    seen_traces.add(key)
                    fresh.append(trace)
            merged.add_traces(fresh)
    return merged


def export_traceset(trace_set: Any, output_dir: str | Path) -> None:
    """Write ``trace_set`` as a dataset folder at ``output_dir`` (new or empty)."""
    # Imported here: keeps pydantic (~50 ms to load) out of `import fib_core.cli`.
    from fib_core.data.traceset import TraceSet

    root = Path(output_dir)
    if root.exists() and any(root.iterdir()):
        raise FibError(f"export_traceset: {root} is not empty; pass a new or empty folder")
    out = TraceSet(root=root)
    for definition in trace_set.definitions.values():
        out.add_definition(definition)
    for sols in trace_set.solutions.values():
        for sol in sols:
            out.add_solution(sol)
    for records in trace_set.workloads.values():
        out.add_workload_traces(records)
    for traces in trace_set.traces.values():
        out.add_traces(traces)
