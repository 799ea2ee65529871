"""``validate_dataset``: scan a dataset, run the chosen categories per definition, write the
report (JSON, text, standard output).

>>> report = validate_dataset("my-dataset", disable_gpu=True, outputs=[])  # doctest: +SKIP
>>> report.findings("error")                                             # doctest: +SKIP
[]
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from fib_core.dataset import default_dataset_path
from fib_core.errors import ConfigError
from fib_core.project.runflow import resolve_device
from fib_core.validate.checks import CPU_CHECKS
from fib_core.validate.context import DefinitionContext, contexts
from fib_core.validate.render import render_text
from fib_core.validate.report import (
    CATEGORIES,
    CPU_CATEGORIES,
    CheckResult,
    DatasetReport,
    DefinitionReport,
    ReportConfig,
)
from fib_core.validate.scan import scan

OUTPUTS = ("stdout", "json", "text")


def choose_checks(checks: Sequence[str] | None, disable_gpu: bool) -> list[str]:
    """The categories to run, in the report's order: all (without ``benchmark`` when
    ``disable_gpu``), or those named; an unknown name is a ConfigError.

    >>> choose_checks(["workload", "layout"], disable_gpu=True)
    ['layout', 'workload']
    """
    wanted = list(CPU_CATEGORIES if disable_gpu else CATEGORIES) if not checks else list(checks)
    for name in wanted:
        if name not in CATEGORIES:
            raise ConfigError(f"--checks: unknown category {name!r}; choose from "
                              f"{', '.join(CATEGORIES)}")
    if disable_gpu:
        wanted = [c for c in wanted if c != "benchmark"]
    return [c for c in CATEGORIES if c in wanted]


def select(found: dict[str, DefinitionContext], op_types: Sequence[str],
           definitions: Sequence[str]) -> list[str]:
    """Definition names matching either filter (none given: all), sorted; a name or op type
    the dataset lacks is a ConfigError naming the closest one."""
    ops = {ctx.op_type for ctx in found.values() if ctx.op_type}
    for flag, asked, known in (("--definitions", definitions, set(found)),
                               ("--op-types", op_types, ops)):
        for name in asked:
            if name not in known:
                close = difflib.get_close_matches(name, sorted(known), n=1)
                hint = f"did you mean {close[0]!r}?" if close else \
                    f"it has: {', '.join(sorted(known)[:8]) or 'none'}"
                raise ConfigError(f"{flag}: {name!r} is not in the dataset; {hint}")
    if not op_types and not definitions:
        return sorted(found)
    return sorted(n for n, ctx in found.items() if n in definitions or ctx.op_type in op_types)


def validate_dataset(
    dataset: str | Path | None = None,
    op_types: Sequence[str] | None = None,
    definitions: Sequence[str] | None = None,
    checks: Sequence[str] | None = None,
    disable_gpu: bool = False,
    output_folder: str | Path | None = None,
    outputs: Sequence[str] | None = None,
    device: str = "auto",
) -> DatasetReport:
    """Validate the dataset at ``dataset`` ($FIB_DATASET_PATH or the embedded one when None).

    ``outputs``: any of "stdout", "json", "text" (default all three); files go to
    ``output_folder`` (default ``<dataset>/reports``) as ``report-<time>.json`` / ``.txt``.
    ``device``: where the ``benchmark`` category evaluates ("auto": the GPU when there is one).
    Without a GPU, the default categories leave ``benchmark`` out (saying so); asked for by
    name, it runs on the CPU (correctness only).
    """
    root = Path(dataset) if dataset is not None else Path(default_dataset_path())
    if not (root / "definitions").is_dir():
        raise ConfigError(f"{root}: no definitions/ folder; pass the dataset root (the folder "
                          "holding definitions/) with --dataset")
    chosen = choose_checks(checks, disable_gpu)
    targets = list(OUTPUTS) if outputs is None else list(outputs)
    for target in targets:
        if target not in OUTPUTS:
            raise ConfigError(f"--outputs: unknown target {target!r}; choose from "
                              f"{', '.join(OUTPUTS)}")
    folder = Path(output_folder) if output_folder is not None else root / "reports"
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    files = {kind: folder / f"report-{stamp}.{ext}" for kind, ext in (("json", "json"),
                                                                       ("text", "txt"))}
    for kind, path in files.items():
        if kind in targets and path.exists():
            raise ConfigError(f"{path}: already exists; wait a second or pass another "
                              "--output-folder")
    notes = []
    if checks is None and "benchmark" in chosen and _no_gpu(device):
        chosen.remove("benchmark")  # a CPU run of every reference is not a default
        notes.append("note: no GPU here, so the benchmark category was left out; "
                     "--checks ...,benchmark runs it on the CPU (correctness only)")
    found = contexts(scan(root))
    names = select(found, list(op_types or ()), list(definitions or ()))
    config = ReportConfig(dataset=str(root), checks=chosen, disable_gpu=disable_gpu,
                          op_types=list(op_types or ()), definitions=list(definitions or ()))
    report = DatasetReport(config=config)
    for name in names:
        report.definitions[name] = validate_definition(found[name], chosen, device)
    _write(report, targets, files)
    if "stdout" in targets:
        for line in notes:
            print(line)
    return report


def _no_gpu(device: str) -> bool:
    """Whether the benchmark category would run on the CPU."""
    return resolve_device(device) == "cpu"


def validate_definition(ctx: DefinitionContext, checks: Sequence[str],
                        device: str = "auto") -> DefinitionReport:
    """One definition's report over the categories ``checks``."""
    entry = DefinitionReport()
    for category in checks:
        if category == "benchmark":
            # Imported here: fib_core.validate.benchmark_check loads this module at import (cycle).
            from fib_core.validate.benchmark_check import check_benchmark

            messages = check_benchmark(ctx, device)
        else:
            messages = CPU_CHECKS[category](ctx)
        setattr(entry, category, CheckResult.of(messages))
    entry.settle()
    return entry


def _write(report: DatasetReport, targets: list[str], files: dict[str, Path]) -> None:
    text = render_text(report)
    for kind in ("json", "text"):
        if kind in targets:
            files[kind].parent.mkdir(parents=True, exist_ok=True)
            content = report.to_json() if kind == "json" else text
            files[kind].write_text(content + "\n", encoding="utf-8")
    if "stdout" in targets:
        print(text)
        written = [str(files[k]) for k in ("json", "text") if k in targets]
        if written:
            print(f"\nreport written to {' and '.join(written)}")
