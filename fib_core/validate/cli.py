"""The ``validate`` and ``validate-render`` commands of ``python -m fib_core`` (their flags and
what they run; :mod:`fib_core.cli` only wires them in).

Exit status of ``validate``: 0 when no definition has an error (warnings allowed), 1 when one
has, 2 for a usage mistake (one ``error:`` line).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fib_core.validate.render import render_report
from fib_core.validate.run import validate_dataset


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_validate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", "--local", dest="dataset", type=Path, metavar="PATH",
                   help="dataset root (default: $FIB_DATASET_PATH or the embedded dataset)")
    p.add_argument("--op-types", type=_names, default=[], metavar="A,B",
                   help="only definitions of these op types (with --definitions: either)")
    p.add_argument("--definitions", type=_names, default=[], metavar="A,B",
                   help="only these definitions (with --op-types: either)")
    p.add_argument("--checks", type=_names, default=None, metavar="A,B",
                   help="categories: layout, definition, workload, solution, trace, baseline, "
                        "benchmark (default: all; without benchmark under --disable-gpu)")
    p.add_argument("--disable-gpu", action="store_true",
                   help="evaluate nothing: leave out the benchmark category")
    p.add_argument("--output-folder", type=Path, metavar="PATH",
                   help="where report-<time>.json/.txt go (default: <dataset>/reports)")
    p.add_argument("--outputs", type=_names, default=["stdout", "json", "text"],
                   metavar="A,B", help="any of stdout, json, text (default: all three)")


def add_render(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", type=Path, help="a report-*.json written by validate")
    p.add_argument("--output", type=Path, metavar="PATH", help="write the text here, not to "
                   "standard output")


def run_validate(args: argparse.Namespace) -> int:
    report = validate_dataset(args.dataset, op_types=args.op_types,
                              definitions=args.definitions, checks=args.checks,
                              disable_gpu=args.disable_gpu, output_folder=args.output_folder,
                              outputs=args.outputs)
    return 1 if report.counts()["error"] else 0


def run_render(args: argparse.Namespace) -> int:
    text = render_report(args.report, args.output)
    if args.output is None:
        print(text)
    else:
        print(f"report written to {args.output}")
    return 0
