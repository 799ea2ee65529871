"""``python -m fib_core``: run benchmarks and read their results from the command line.

Commands:
  run            benchmark solutions of a dataset (live progress, then the results tables)
  report summary the contest standing of every solution with traces in a dataset
  report best    the fastest passing solution of each workload
  report merge   join several dataset folders / run outputs into one

Exit status: 0 when nothing failed, 1 when a workload failed, 2 for a usage or data mistake
(printed as one ``error: ...`` line). Benchmark flags default to "not set": only the flags given
on the command line reach :class:`BenchmarkConfig`, so config-side precedence stays intact.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fib_core.errors import FibError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2

# CLI flag destination -> BenchmarkConfig field.
CONFIG_FLAGS: dict[str, str] = {
    "warmup_runs": "warmup_runs",
    "iterations": "iterations",
    "num_trials": "num_trials",
    "atol": "atol",
    "rtol": "rtol",
    "required_matched_ratio": "required_matched_ratio",
    "timeout": "timeout_seconds",
    "isolated": "isolated",
    "device": "device",
    "seed": "seed",
    "definitions": "definitions",
    "solutions": "solutions",
    "workloads": "workloads",
}


class _Parser(argparse.ArgumentParser):
    """argparse, but usage mistakes exit with our status 2 and one ``error:`` line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m fib_core", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run(sub.add_parser("run", help="benchmark solutions of a dataset"))
    report = sub.add_parser("report", help="read results stored in a dataset")
    rsub = report.add_subparsers(dest="report_command", required=True, parser_class=_Parser)
    for name, text in (
        ("summary", "contest standing of every solution with traces"),
        ("best", "fastest passing solution of each workload"),
    ):
        p = rsub.add_parser(name, help=text)
        p.add_argument("--local", action="append", type=Path, required=True, metavar="PATH",
                       help="dataset folder (repeatable)")
    merge = rsub.add_parser("merge", help="merge dataset folders / run outputs into one")
    merge.add_argument("--local", action="append", type=Path, required=True, metavar="PATH",
                       help="source dataset folder (repeatable, merged in order)")
    merge.add_argument("--output", "-o", type=Path, required=True, metavar="PATH",
                       help="folder to write (created; an existing one is merged into)")
    return parser


def _add_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("--local", action="append", type=Path, default=[], metavar="PATH",
                   help="dataset folder, or solution JSON file/folder to add (repeatable); "
                   "without a dataset, $FIB_DATASET_PATH or the embedded dataset is used")
    p.add_argument("--definitions", nargs="+", metavar="NAME", help="only these definitions")
    p.add_argument("--solutions", nargs="+", metavar="NAME", help="only these solutions")
    p.add_argument("--workloads", nargs="+", metavar="UUID",
                   help="only these workloads (uuid or a prefix of 6+ characters)")
    p.add_argument("--warmup-runs", type=int, metavar="N")
    p.add_argument("--iterations", type=int, metavar="N")
    p.add_argument("--num-trials", type=int, metavar="N")
    p.add_argument("--atol", type=float)
    p.add_argument("--rtol", type=float)
    p.add_argument("--required-matched-ratio", type=float, metavar="R")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="per solution x workload")
    p.add_argument("--isolated", action="store_true", default=None,
                   help="one process per solution x workload, as the organizers grade")
    p.add_argument("--resume", action="store_true", default=None,
                   help="skip (solution, workload) pairs that already have a trace")
    p.add_argument("--save-results", action=argparse.BooleanOptionalAction, default=None,
                   help="append traces to the dataset (default: yes)")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"))
    p.add_argument("--seed", type=int)
    p.add_argument("--log-level", default="WARNING",
                   choices=("DEBUG", "INFO", "WARNING", "ERROR"), type=str.upper)


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """BenchmarkConfig fields for exactly the flags the user set (unset flags are None)."""
    out: dict[str, Any] = {}
    for dest, field_name in CONFIG_FLAGS.items():
        value = getattr(args, dest, None)
        if value is not None:
            out[field_name] = tuple(value) if isinstance(value, list) else value
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from rich.console import Console

    console = Console()
    try:
        if args.command == "run":
            return _run(args, console)
        return _report(args, console)
    except FibError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted; traces measured so far were kept (use --resume)", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace, console: Any) -> int:
    logging.basicConfig(level=args.log_level, format="%(levelname)s %(name)s: %(message)s")
    from fib_core.cli_run import run_command

    return run_command(
        args.local,
        config_overrides(args),
        console,
        dump_traces=args.save_results is not False,
        resume=bool(args.resume),
    )


def _report(args: argparse.Namespace, console: Any) -> int:
    from fib_core.report import dataset_views as views

    if args.report_command == "merge":
        from fib_core.report.merge_dirs import merge_datasets

        stats = merge_datasets(list(args.local), args.output)
        console.print(
            f"merged {len(args.local)} folder(s) into {args.output}: {stats.files_copied} files "
            f"copied, {stats.records_added} records added, {stats.duplicates_dropped} duplicates "
            "dropped",
            highlight=False,
        )
        return EXIT_OK
    found = [st for path in args.local for st in views.standings(_load_dataset(path))]
    if not found:
        console.print("no traces found: run `python -m fib_core run --local PATH` first")
        return EXIT_FAILED
    if args.report_command == "summary":
        views.render_standings(found, console)
        return EXIT_OK if all(st.summary.all_passed for st in found) else EXIT_FAILED
    entries = views.best_per_workload(found)
    views.render_best(entries, console)
    return EXIT_OK if entries else EXIT_FAILED


def _load_dataset(path: Path) -> Any:
    from fib_core.cli_run import load_trace_set

    return load_trace_set(path)
