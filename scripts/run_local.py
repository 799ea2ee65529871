"""Check and time your kernel on this machine, as config.toml describes.

run (on a GPU: correctness and timing; without one: a CPU smoke run, correctness only):
    python scripts/run_local.py                       # every workload (CPU: the quick subset)
    python scripts/run_local.py --quick               # the quick subset
    python scripts/run_local.py --workloads batch_size=64
    python scripts/run_local.py --strict --quick      # also fail errors the tolerance hides
    python scripts/run_local.py --contest             # exactly the organizers' settings
    python scripts/run_local.py --definition gdn_prefill_qk4_v8_d128_k_last   # one of a track
    python scripts/run_local.py --track               # every definition, then the track score
    python scripts/run_local.py --quick --watch       # again after each save, processes ready
compare and record (every run is recorded in runs/ledger.jsonl; scripts/history.py lists them):
    python scripts/run_local.py --json run.json       # machine-readable results
    python scripts/run_local.py --compare run.json    # what changed since that run
    python scripts/run_local.py --compare best        # ... since the best recorded run
    python scripts/run_local.py --html report.html    # also an HTML report with plots
debug (one workload, no benchmark; CPU too, except --ncu and --sanitize):
    python scripts/run_local.py --inline --workloads 3f2a   # one call here: pdb works
    python scripts/run_local.py --dump dump/          # failed workloads' tensors, on disk
    python scripts/run_local.py --profile-harness     # where the time went, per phase
GPU (a CUDA GPU and its tools; refused or skipped, with a note, on a CPU):
    python scripts/run_local.py --gpus 0,1            # spread over two GPUs (default: all)
    python scripts/run_local.py --cross-check         # every GPU timer on each workload
    python scripts/run_local.py --ncu --workloads 3f2a      # Nsight Compute, your kernels only
    python scripts/run_local.py --sanitize memcheck         # compute-sanitizer, your lines

Uses $FIB_DATASET_PATH, or the embedded default dataset when it is unset.
Exit status: 0 every workload passed (with --strict: the strict check too), 1 a workload
failed, 2 a usage error (a bad flag, config.toml, dataset or path), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the vendored fib_core

from fib_core.bench.settings import LOCAL, flags_given  # noqa: E402
from fib_core.bench.settings import add_flags as add_setting_flags  # noqa: E402
from fib_core.errors import FibError  # noqa: E402
from fib_core.project.debug_tools import add_flags as add_debug_flags  # noqa: E402
from fib_core.project.debug_tools import dump_after_run, one_workload_mode  # noqa: E402
from fib_core.project.entry import display_path, run_script  # noqa: E402
from fib_core.project.recording import RunRecording  # noqa: E402
from fib_core.project.run_finish import check_compare_file, finish, merge_shards  # noqa: E402
from fib_core.project.runflow import (  # noqa: E402
    RunOptions,
    execute_on_gpus,
    make_request,
    resolve_device,
)
from fib_core.project.workspace import open_workspace  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    """The command line, its flags in four groups (run, compare, debug, GPU); the module's
    docstring (examples, exit status) is the help's epilog."""
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="\n".join(__doc__.splitlines()[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run = p.add_argument_group("run", "what runs, and the engine's settings")
    run.add_argument("--config", type=Path, default=Path("config.toml"),
                     help="the fork's config file (default: %(default)s)")
    run.add_argument("--definition", metavar="NAME", help="one definition of a track fork")
    run.add_argument(
        "--track", action="store_true", help="every definition of the fork, then the track score"
    )
    run.add_argument("--quick", action="store_true", help="only the quick subset")
    run.add_argument(
        "--strict",
        action="store_true",
        help="also fail workloads whose error is large against the outputs' own scale "
        "(a local check; the judge's verdict is unchanged)",
    )
    run.add_argument(
        "--contest",
        action="store_true",
        help="exactly the organizers' settings for this definition (isolated, their counts)",
    )
    run.add_argument(
        "--watch",
        action="store_true",
        help="after the run, wait for a change to solution/ or the config and run again, with "
        "the next run's processes started and waiting (Ctrl-C to stop)",
    )
    add_setting_flags(run, LOCAL)  # --workloads, --warmup, --iterations, ... --device
    record = p.add_argument_group("compare and record")
    record.add_argument("--json", type=Path, dest="json_path", metavar="PATH",
                        help="write machine-readable results")
    record.add_argument(
        "--compare",
        metavar="REF",
        help="a previous --json file, or last / best / a commit prefix from runs/ledger.jsonl",
    )
    record.add_argument("--html", type=Path, metavar="PATH", help="also write an HTML report here")
    record.add_argument(
        "--no-ledger", action="store_true", help="do not record this run in runs/ledger.jsonl"
    )
    record.add_argument(
        "--traces",
        type=Path,
        dest="traces_path",
        metavar="PATH",
        help="also append the traces (JSONL) here, e.g. DATASET/traces/mine.jsonl for apply",
    )
    record.add_argument("--wide", action="store_true", help="every table column, however wide")
    debug = p.add_argument_group("debug", "find what went wrong (--inline: one workload, no "
                                 "benchmark; these work on a CPU too)")
    gpu = p.add_argument_group("GPU", "need a CUDA GPU (and its tools for --ncu, --sanitize)")
    add_debug_flags(debug, gpu)
    debug.add_argument(
        "--profile-harness",
        action="store_true",
        help="print where the run's time went (per phase, and the GPU's share)",
    )
    gpu.add_argument(
        "--gpus",
        metavar="LIST",
        help="GPUs to spread the workloads over, e.g. 0,1 or 1 (default: every visible GPU)",
    )
    gpu.add_argument(
        "--cross-check",
        action="store_true",
        help="also time each workload with every available GPU timer and compare them",
    )
    return p


def parse_args(argv: list[str] | None = None) -> tuple[Path, RunOptions, list[str | None]]:
    p = build_parser()
    a = p.parse_args(argv)
    compare_path, compare_ref = split_compare(a.compare)
    opts = RunOptions(
        flags=flags_given(a, LOCAL),
        quick=a.quick,
        json_path=a.json_path,
        compare_path=compare_path,
        compare_ref=compare_ref,
        html_path=a.html,
        cross_check=a.cross_check,
        ledger=not a.no_ledger,
        wide=a.wide,
        contest=a.contest,
        debug=a,
        traces_path=a.traces_path,
        gpus=a.gpus,
        profile_harness=a.profile_harness,
    )
    from fib_core.project.track_run import selected_definitions

    opts.track = a.track
    opts.strict = a.strict
    opts.watch = a.watch
    return a.config, opts, selected_definitions(a.config, a.definition, a.track)


def split_compare(value: str | None) -> tuple[Path | None, str | None]:
    """(results file, ledger reference): an existing file wins, then last/best/commit prefix."""
    from fib_core.report.ledger import is_ledger_ref

    if value is None:
        return None, None
    if Path(value).is_file() or not is_ledger_ref(value):
        return Path(value), None
    return None, value


def torch_bytecode_missing() -> bool:
    """PYTHONDONTWRITEBYTECODE is set and torch's package folder holds no compiled bytecode
    (looked up without importing torch)."""
    from fib_core.paths import torch_package_dir

    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return False
    folder = torch_package_dir()
    if folder is None:
        return False
    cache = folder / "__pycache__"
    return not (cache.is_dir() and any(cache.glob("*.pyc")))


def start_processes_early(opts: RunOptions) -> None:
    """Boot the run's processes now (the judge and first worker; on several GPUs, each GPU's
    process with its own): they import torch side by side with this process (which imports it
    next), loads the dataset and packs, instead of after it. Not for the one-workload
    debugging flags, which run no benchmark."""
    from fib_core.bench.engine.gpus import start_early
    from fib_core.project.debug_tools import requested_one_workload
    from fib_core.project.workspace import resolve_dataset

    try:
        if opts.debug is not None and requested_one_workload(opts.debug) is not None:
            return
        dataset, _ = resolve_dataset()
    except FibError:
        return  # the run itself reports the problem, in one line
    start_early(opts.flags.get("device"), opts.gpus, dataset)


def main() -> int:
    from rich.console import Console

    config_path, opts, definitions = parse_args()
    check_compare_file(opts)
    if opts.debug.dump is not None:
        from fib_core.project.debug_dump import check_dump_folder

        check_dump_folder(opts.debug.dump)
    start_processes_early(opts)
    console = Console()
    if torch_bytecode_missing():
        console.print(
            "note: PYTHONDONTWRITEBYTECODE is set and torch has no compiled bytecode, so each "
            "worker process compiles torch's Python sources again (about 5 s more per process "
            "on a GPU machine, once per workload in --contest runs); unset it to keep the "
            "compiled bytecode"
        )
    device = resolve_device(opts.flags.get("device"))  # once for the whole run
    if not opts.watch:
        return run_all(config_path, opts, definitions, device, console)
    from fib_core.project.watch import watch

    outputs = [p for p in (opts.json_path, opts.html_path, opts.traces_path, opts.debug.dump)
               if p is not None]  # written by each run: not a change to run again for
    return watch(
        lambda: run_all(config_path, copy.copy(opts), definitions, device, console),
        lambda: [config_path, config_path.parent / "solution"],
        lambda: start_processes_early(opts),
        lambda text: console.print(text, markup=False, highlight=False),
        ignore=outputs,
    )


@dataclass
class Prepared:
    """One definition made ready to run: what can be wrong with it was found here."""

    definition: str | None
    opts: RunOptions
    ws: Any  # a Workspace
    solution: Any  # a Solution
    request: Any  # a RunRequest


def prepare(config_path: Path, definition: str | None, opts: RunOptions, device: str) -> Prepared:
    """Load, pack and check one definition of the fork (None: the default one) without running
    anything: its config table, source folder, entry point and signature, the run's settings
    and, for a benchmark, the ledger and --compare reference. Raises a FibError."""
    from fib_core.project.debug_tools import requested_one_workload

    ws = open_workspace(config_path, definition)
    solution = ws.pack()
    opts.source_dir = display_path(ws.cfg.source_dir)
    request = make_request(ws.cfg, solution, opts, device)
    request.dataset_path = str(ws.dataset_path)
    if requested_one_workload(opts.debug) is None:  # a benchmark: it will be recorded
        opts.recording = RunRecording.for_run(
            ws.cfg.root,
            solution,
            request,
            ledger=opts.ledger,
            compare_ref=opts.compare_ref,
            html_path=opts.html_path,
        )
        opts.recording.check(ws.definition.name)
    return Prepared(definition, opts, ws, solution, request)


def run_all(config_path: Path, opts: RunOptions, definitions: list[str | None], device: str,
            console: Any) -> int:
    """One run of what the command line chose: the default definition, or each of a track's;
    the exit status. Every definition in scope is prepared (config, sources, settings checked)
    before the first one runs, so a mistake in the last one costs no run of the first."""
    if definitions == [None]:
        return run_definition(prepare(config_path, None, opts, device), device, console)
    from fib_core.project.track_run import options_for, print_track_summary

    several = len(definitions) > 1
    ready = [prepare(config_path, name, options_for(opts, name, several), device)
             for name in definitions]
    codes: dict[str, int] = {}
    results = {}
    for one in ready:
        name = one.ws.cfg.solution.definition
        codes[name] = run_definition(one, device, console)
        if one.opts.results is not None:
            results[name] = one.opts.results
    if opts.track:
        print_track_summary(results, codes, console)
    return max(codes.values())


def run_definition(ready: Prepared, device: str, console: Any) -> int:
    """Benchmark one prepared definition of the fork on ``device`` ("cuda" | "cpu"); the exit
    status. The workspace's dataset is loaded once and used throughout."""
    from fib_core.report.render import progress_bar

    ws, solution, request, opts = ready.ws, ready.solution, ready.request, ready.opts
    config_path = ws.cfg.path
    mode = ""
    if opts.contest:
        from fib_core.bench.grading import eval_settings

        mode = f" · contest settings: {eval_settings(ws.definition.name).describe_contest()}"
    console.print(
        f"[bold]{solution.name}[/] → {ws.definition.name}  "
        f"(dataset: {'embedded default' if ws.embedded else ws.dataset_path}){mode}"
    )
    code = one_workload_mode(
        opts.debug,
        ws,
        filters=request.filters,
        quick=opts.quick,
        console=console,
        config_path=config_path,
    )
    if code is not None:  # --inline / --ncu / --sanitize: one workload, no benchmark
        return code
    started = time.perf_counter()
    with progress_bar(console=console) as on_event:
        shards = execute_on_gpus(request, opts.gpus, on_event=on_event, trace_set=ws.trace_set)
    wall = time.perf_counter() - started
    merged = merge_shards(shards)  # once: the report, then --dump and --profile-harness
    code = finish(shards, ws.definition, opts, console, merged=merged)
    traces, _ = merged
    if opts.debug.dump is not None:
        dump_after_run(
            opts.debug.dump,
            ws,
            [t.to_dict() for t in traces],
            chosen=bool(request.filters),
            device=device,
            console=console,
        )
    if opts.profile_harness:
        from fib_core.bench.evaluation.phases import format_breakdown, harness_breakdown

        console.print(format_breakdown(harness_breakdown(traces), wall_s=wall, device=device,
                                       gpus=len(shards)), markup=False)
    return code


if __name__ == "__main__":
    run_script(main)
