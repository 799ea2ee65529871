"""``python -m fib_core``: run benchmarks and read their results from the command line.

Commands:
  run            benchmark solutions of a dataset (live progress, then the results tables)
  report summary the contest standing of every solution with traces in a dataset
  report best    the fastest passing solution of each workload
  report visualize  the organizers' name; the kit draws no charts: the summary table
  report merge   join several dataset folders / run outputs into one
  validate       check a dataset (layout, definition, workload, solution, trace, baseline,
                 benchmark); validate-render shows a saved report as text
  serve          an HTTP evaluation service over a dataset (pip install -e ".[serve]")

Exit status: 0 when nothing failed, 1 when a workload failed, 2 for a usage or data mistake
(printed as one ``error: ...`` line). The benchmark flags come from the settings table
(:mod:`fib_core.bench.settings`) and default to "not set": only the flags given on the command
line reach :class:`BenchmarkConfig`, above the CPU smoke counts when no GPU is used.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fib_core.errors import FibError
from fib_core.project.cli_help import replace_stored_solution

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but usage mistakes exit with our status 2 and one ``error:`` line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m fib_core",
        description="Run kernel benchmarks on a FlashInfer-Trace dataset and read their results.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run(sub.add_parser("run", help="benchmark solutions of a dataset"))
    report = sub.add_parser("report", help="read results stored in a dataset")
    rsub = report.add_subparsers(dest="report_command", required=True, parser_class=_Parser)
    for name, text in (
        ("summary", "contest standing of every solution with traces"),
        ("best", "fastest passing solution of each workload"),
        ("visualize", "the organizers' name: the kit draws no charts, so the summary table"),
    ):
        _add_local(
            rsub.add_parser(name, help=text),
            "dataset folder (repeatable; default: $FIB_DATASET_PATH or the embedded dataset)",
        )
    merge = rsub.add_parser("merge", help="merge dataset folders / run outputs into one")
    _add_local(merge, "source dataset folder (repeatable, merged in order)", required=True)
    merge.add_argument(
        "--output",
        "-o",
        type=Path,
        required=True,
        metavar="PATH",
        help="folder to write (created; an existing one is merged into)",
    )
    # Imported here: the validate and serve commands' modules load pydantic (~50 ms) and the
    # engine, which `import fib_core.cli` does without.
    from fib_core.serve.cli import add_serve
    from fib_core.validate.cli import add_render, add_validate

    add_validate(sub.add_parser("validate", help="check a dataset, category by category"))
    add_render(sub.add_parser("validate-render", help="show a validate report as text"))
    add_serve(sub.add_parser("serve", help="an HTTP evaluation service over a dataset"))
    return parser


def _add_local(p: argparse.ArgumentParser, help_text: str, required: bool = False) -> None:
    """The repeatable ``--local PATH`` of every command."""
    extra: dict[str, Any] = {"required": True} if required else {"default": []}
    p.add_argument("--local", action="append", type=Path, metavar="PATH", help=help_text, **extra)


def _add_run(p: argparse.ArgumentParser) -> None:
    # Imported here: fib_core.bench adds ~13 ms to `import fib_core.cli`.
    from fib_core.bench.settings import CLI, add_flags

    _add_local(
        p,
        "dataset folder, or solution JSON file/folder to add (repeatable); "
        "without a dataset, $FIB_DATASET_PATH or the embedded dataset is used",
    )
    add_flags(p, CLI)
    p.add_argument(
        "--resume",
        action="store_true",
        default=None,
        help="skip (solution, workload) pairs that already have a trace",
    )
    p.add_argument(
        "--save-results",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="append traces to the dataset (default: yes)",
    )
    p.add_argument(
        "--log-level",
        default="WARNING",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        type=str.upper,
    )


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """BenchmarkConfig fields for exactly the flags the user set (unset flags are None)."""
    # Imported here: fib_core.bench adds ~13 ms to `import fib_core.cli`.
    from fib_core.bench.settings import CLI, flags_given

    return flags_given(args, CLI)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Imported here: keeps rich (~55 ms to load) out of `import fib_core.cli`.
    from rich.console import Console

    console = Console()
    try:
        if args.command == "run":
            return _run(args, console)
        if args.command in _COMMANDS:
            return _COMMANDS[args.command](args)
        return _report(args, console)
    except FibError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted; traces measured so far were kept (use --resume)", file=sys.stderr)
        return 130


def _command(module: str, name: str) -> Any:
    """A command's runner, imported only when that command runs."""

    def call(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(module), name)(args)

    return call


_COMMANDS = {
    "validate": _command("fib_core.validate.cli", "run_validate"),
    "validate-render": _command("fib_core.validate.cli", "run_render"),
    "serve": _command("fib_core.serve.cli", "run_serve"),
}


def _run(args: argparse.Namespace, console: Any) -> int:
    logging.basicConfig(level=args.log_level, format="%(levelname)s %(name)s: %(message)s")
    # Imported here: fib_core.bench adds ~13 ms to `import fib_core.cli`.
    from fib_core.bench.config import BenchmarkConfig
    from fib_core.bench.settings import merge

    # Imported here: fib_core.project.runflow adds ~22 ms to `import fib_core.cli`.
    from fib_core.project.runflow import resolve_device

    flags = config_overrides(args)
    cpu = resolve_device(flags.get("device")) == "cpu"  # no GPU: the CPU smoke-run counts
    config = BenchmarkConfig(**merge(cpu=cpu, flags=flags))
    dump = args.save_results is not False
    trace_set = load_local(args.local, persist_solutions=dump, console=console)
    # Imported here: keeps pydantic (~50 ms to load) out of `import fib_core.cli`.
    from fib_core.bench.engine.flow import check_filters

    check_filters(trace_set, config, prefix="--")  # a typo'd --definitions/--solutions name
    total = count_pairs(trace_set, config)
    if total == 0:
        raise FibError(
            "run: nothing to benchmark (no solution x workload pair matches); check --local, "
            "--definitions, --solutions and --workloads"
        )
    # Imported here: keeps pydantic (~50 ms to load) out of `import fib_core.cli`.
    from fib_core.report.render import progress_bar, render_results
    from fib_core.report.results import results_by_solution

    with _benchmark_class()(trace_set, config) as benchmark, progress_bar(total, console) as cb:
        traces = benchmark.run_all(dump_traces=dump, resume=bool(args.resume), on_event=cb)
    if args.resume:  # show the whole picture: pairs finished earlier plus this run's
        new = {id(t) for t in traces}
        traces = [*(t for t in in_scope_traces(trace_set, config) if id(t) not in new), *traces]
    authors = {name: sol.author for name, sol in _solutions_by_name(trace_set).items()}
    failed = False
    for results in results_by_solution(traces, authors=authors):
        console.print()
        summary = render_results(results, console)
        failed = failed or not summary.all_passed
    problems = benchmark.save_problems
    if dump and trace_set.root is not None and not problems:
        console.print(f"traces appended under {trace_set.root / 'traces'}", highlight=False)
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    if problems:  # measured and kept, but not in the dataset: the user has to act
        return EXIT_ERROR
    return EXIT_FAILED if failed else EXIT_OK


def in_scope_traces(trace_set: Any, config: Any) -> list[Any]:
    """Stored traces of the (definition, solution, workload) triples a run with ``config`` covers."""
    out = []
    for name, traces in trace_set.traces.items():
        if config.definitions is not None and name not in config.definitions:
            continue
        for t in traces:
            if config.solutions is not None and t.solution not in config.solutions:
                continue
            if t.evaluation is not None and config.matches_workload(t.workload.uuid):
                out.append(t)
    return out


def _benchmark_class() -> Any:
    # Imported here: fib_core.bench adds ~13 ms to `import fib_core.cli`.
    import fib_core.bench as bench

    if hasattr(bench, "Benchmark"):
        return bench.Benchmark
    # Imported here: keeps pydantic (~50 ms to load) out of `import fib_core.cli`.
    from fib_core.bench.engine.flow import Engine

    return Engine


def count_pairs(trace_set: Any, config: Any) -> int:
    """How many (solution, workload) pairs a run with ``config`` covers: the progress total."""
    total = 0
    for name in trace_set.definitions:
        if config.definitions is not None and name not in config.definitions:
            continue
        chosen = [
            s
            for s in trace_set.solutions.get(name, [])
            if config.solutions is None or s.name in config.solutions
        ]
        workloads = [
            w for w in trace_set.workloads.get(name, []) if config.matches_workload(w.workload.uuid)
        ]
        total += len(chosen) * len(workloads)
    return total


def classify_local(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """Split ``--local`` paths into dataset folders and solution JSON files.

    A folder holding ``definitions/`` is a dataset; a ``.json`` file is a solution; any other
    folder contributes every ``.json`` file under it as a solution.
    """
    datasets: list[Path] = []
    solutions: list[Path] = []
    for path in paths:
        if not path.exists():
            raise FibError(
                f"--local {path}: no such file or folder; pass a dataset folder or a solution JSON"
            )
        if path.is_dir() and (path / "definitions").is_dir():
            if all(path.resolve() != d.resolve() for d in datasets):  # named twice: load once
                datasets.append(path)
        elif path.is_file() and path.suffix == ".json":
            solutions.append(path)
        elif path.is_dir():
            found = sorted(p for p in path.rglob("*.json") if p.is_file())
            if not found:
                raise FibError(
                    f"--local {path}: neither a dataset (no definitions/ folder) nor a folder of "
                    "solution JSON files"
                )
            solutions += found
        else:
            raise FibError(f"--local {path}: expected a dataset folder or a solution .json file")
    return datasets, solutions


def load_local(paths: Sequence[Path], *, persist_solutions: bool, console: Any = None) -> Any:
    """One TraceSet from ``--local`` paths (default dataset when none is a dataset).

    Later datasets add their definitions, workloads, solutions and traces to the first, whose
    folder receives the new traces; what two datasets share (same name, same content) is kept
    once. Solution files join in memory, and are also written into the dataset when
    ``persist_solutions`` (results are being saved: the traces then keep pointing at a solution
    the dataset holds).
    """
    # Imported here: keeps pydantic (~50 ms to load) out of `import fib_core.cli`.
    from fib_core.data import Solution, load_json
    from fib_core.data.traceset import TraceSet

    dataset_paths, solution_files = classify_local(paths)
    if not dataset_paths:
        # Imported here: fib_core.dataset adds ~15 ms to `import fib_core.cli`.
        from fib_core.dataset import default_dataset_path

        dataset_paths = [Path(default_dataset_path())]
    merged = _Merged()
    sets = [load_trace_set(p) for p in dataset_paths]
    for ts in sets:
        merged.add_dataset(ts)
    loaded = [(load_json(f, Solution), str(f)) for f in solution_files]
    to_add = [sol for sol, source in loaded if merged.add_solution(sol, source, replace=True)]
    for note in merged.notes:
        if console is not None:
            console.print(f"note: {note}", highlight=False, soft_wrap=True)
    if persist_solutions:  # write them through the TraceSet, which files them in the dataset
        for sol in to_add:
            merged.solutions[sol.definition].remove(sol)
    trace_set = TraceSet(
        root=sets[0].root,
        definitions=merged.definitions,
        solutions=merged.solutions,
        workloads=merged.workloads,
        traces=merged.traces,
    )
    if persist_solutions:
        for sol in to_add:
            trace_set.add_solution(sol)
    return trace_set


class _Merged:
    """Definitions, solutions, workloads and traces gathered from several datasets."""

    def __init__(self) -> None:
        self.definitions: dict[str, Any] = {}
        self.solutions: dict[str, list[Any]] = {}
        self.workloads: dict[str, list[Any]] = {}
        self.traces: dict[str, list[Any]] = {}
        self._solution_names: dict[str, Any] = {}
        self._solution_files: dict[str, Path] = {}
        self._workload_uuids: set[str] = set()
        self.notes: list[str] = []

    def add_dataset(self, ts: Any) -> None:
        for name, definition in ts.definitions.items():
            held = self.definitions.setdefault(name, definition)
            if held is not definition and held.to_dict() != definition.to_dict():
                raise FibError(
                    f"--local {ts.root}: definition {name!r} differs from the one in an earlier "
                    "dataset; pass only one of them"
                )
        self._solution_files.update(getattr(ts, "_solution_files", {}))
        for sols in ts.solutions.values():
            for sol in sols:
                self.add_solution(sol, str(ts.root))
        for name, records in ts.workloads.items():
            for record in records:
                if record.workload.uuid not in self._workload_uuids:
                    self._workload_uuids.add(record.workload.uuid)
                    self.workloads.setdefault(name, []).append(record)
        for name, traces in ts.traces.items():
            self.traces.setdefault(name, []).extend(traces)

    def add_solution(self, sol: Any, source: str, *, replace: bool = False) -> bool:
        """Add ``sol``; False when an identical one is already there. A conflict raises, unless
        ``replace`` (a solution file given with --local): an edited solution then replaces the
        dataset's stored copy of the same name and file, with a note."""
        if sol.definition not in self.definitions:
            raise FibError(
                f"--local {source}: solution {sol.name!r} is for definition {sol.definition!r}, "
                "which the dataset does not hold; pass the dataset that defines it with --local"
            )
        held = self._solution_names.get(sol.name)
        if held is not None:
            if held.hash() != sol.hash() and replace:
                self.notes.append(
                    replace_stored_solution(
                        self.solutions, held, sol, self._solution_files.get(sol.name), source
                    )
                )
                self._solution_names[sol.name] = sol
                return True
            if held.hash() != sol.hash():
                raise FibError(
                    f"--local {source}: solution {sol.name!r} is already in the dataset with "
                    "other sources; rename yours (the `name` field) or remove the other copy"
                )
            return False
        self._solution_names[sol.name] = sol
        self.solutions.setdefault(sol.definition, []).append(sol)
        return True


def load_trace_set(path: Path) -> Any:
    # Imported here: keeps pydantic (~50 ms to load) out of `import fib_core.cli`.
    from fib_core.data.traceset import TraceSet

    return TraceSet.from_path(path)


def _solutions_by_name(trace_set: Any) -> dict[str, Any]:
    return {s.name: s for items in trace_set.solutions.values() for s in items}


def _report(args: argparse.Namespace, console: Any) -> int:
    # Imported here: keeps pydantic (~50 ms to load) out of `import fib_core.cli`.
    from fib_core.report import dataset_views as views

    if args.report_command == "merge":
        # Imported here: keeps pydantic (~50 ms to load) out of `import fib_core.cli`.
        from fib_core.report.merge_dirs import merge_datasets

        stats = merge_datasets(list(args.local), args.output)
        console.print(
            f"merged {len(args.local)} folder(s) into {args.output}: {stats.files_copied} files "
            f"copied, {stats.records_added} records added, {stats.duplicates_dropped} duplicates "
            "dropped",
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_OK
    if not args.local:
        # Imported here: fib_core.dataset adds ~15 ms to `import fib_core.cli`.
        from fib_core.dataset import default_dataset_path

        args.local = [Path(default_dataset_path())]
    found = [st for path in args.local for st in views.standings(load_trace_set(path))]
    if not found:
        console.print("no traces found: run `python -m fib_core run --local PATH` first")
        return EXIT_FAILED
    if args.report_command in ("summary", "visualize"):
        views.render_standings(found, console)
        return EXIT_OK if all(st.summary.all_passed for st in found) else EXIT_FAILED
    entries = views.best_per_workload(found)
    views.render_best(entries, console)
    return EXIT_OK if entries else EXIT_FAILED


def cli() -> None:
    """Console entry point under the organizers' name: :func:`main` on ``sys.argv``, then exit."""
    raise SystemExit(main())
