"""The end of a run, in the launching process: the shards' traces merged, the results table
and the contest score printed, ``--json``/``--traces`` written, the run recorded; the exit
status (0 only if every workload passed).

:mod:`.runflow` makes the request and hands it to the engine; this module is what happens
to the shards that come back, wherever they ran (here, on several GPUs, on Modal). Their
baseline figures (``ShardResult.baseline``: each Modal shard's own, or a several-GPU run's
one measurement on its first shard) are merged by the contest score.

Example::

    code = finish(execute_on_gpus(request, None), definition, opts)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fib_core.bench.engine.shard_run import ShardResult
from fib_core.bench.engine.trace_sink import write_or_fallback
from fib_core.data.json_io import append_jsonl
from fib_core.data.trace import EvaluationStatus
from fib_core.project.runflow import RunOptions

if TYPE_CHECKING:
    from fib_core.data import Definition, Trace


def merge_shards(shards: list[ShardResult]) -> tuple[list[Trace], ShardResult]:
    """All shards' traces in selection order, and the first shard's facts."""
    if not shards:
        raise ValueError("no shard results to merge")
    order = {uuid: i for i, uuid in enumerate(shards[0].order)}
    traces = [t for s in shards for t in s.traces]
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
        from fib_core.report.results import RunResults  # start-up time: see finish

        RunResults.from_json(opts.compare_path)


def finish(shards: list[ShardResult], definition: Definition, opts: RunOptions, console: Any = None,
           *, merged: tuple[list[Trace], ShardResult] | None = None) -> int:
    """Print table and summary, write --json, show --compare; 0 only if every workload passed.

    ``merged``: :func:`merge_shards` of ``shards``, from a caller that merged them itself
    because it uses the traces after the report (run_local's ``--dump``), so they are merged
    once; None merges them here."""
    # Imported here for start-up time: a launcher imports this module at its start, before it
    # starts the run's processes; the report, the baselines and rich wait for the run's end.
    from rich.console import Console

    from fib_core.baselines.contest import contest_of_run, print_contest_score
    from fib_core.compile.source_map import map_trace_logs
    from fib_core.project.cross_check_table import print_cross_check
    from fib_core.project.strict_view import print_correctness_view
    from fib_core.report.render import render_results
    from fib_core.report.results import RunResults

    console = console or Console()
    traces, first = merged if merged is not None else merge_shards(shards)
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
    contest = None
    if first.device == "cuda":  # the contest's score, against the FlashInfer baseline
        contest = contest_of_run(definition.name, traces, shards)
        results.contest, results.contest_score = contest.model_dump(mode="json"), contest.score
    render_results(
        results, console, compare=previous, scope=run_scope(first, len(traces)), wide=opts.wide
    )
    if contest is not None:
        print_contest_score(contest, shards, console)
    cross = [row for s in shards for row in s.cross_check]
    cross_notes = list(dict.fromkeys(n for s in shards for n in s.cross_check_notes))
    if cross or cross_notes:
        print_cross_check(cross, cross_notes, console)
    strict_failed = print_correctness_view(traces, console, strict=opts.strict)
    problems = _write_outputs(opts, results, traces, console)
    if opts.recording is not None:
        problems += opts.recording.keep(results, console, cross_check=cross)
    problems = [p for p in problems if p]
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    failed = [
        t for t in traces if t.evaluation is None or t.evaluation.status != EvaluationStatus.PASSED
    ]
    if problems:
        return 2  # the measurements are kept, but not where the user asked
    return 1 if failed or strict_failed or not traces else 0


def _write_outputs(opts: RunOptions, results: Any, traces: list, console: Any) -> list[str | None]:
    """``--json`` and ``--traces``, each written where asked or to a fallback file; the
    problems, one line each (None where there was none)."""
    problems: list[str | None] = []
    if opts.json_path is not None:
        written, problem = write_or_fallback(results.to_json, opts.json_path, "results")
        problems.append(problem)
        if problem is None:
            console.print(f"results written to {written}")
    if opts.traces_path is not None:

        def append(path: Path) -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            append_jsonl(path, traces)

        written, problem = write_or_fallback(append, opts.traces_path, "traces")
        problems.append(problem)
        if problem is None:
            console.print(f"traces appended to {written}")
    return problems
