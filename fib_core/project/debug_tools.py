"""The debugging flags of ``run_local.py``: ``--dump``, ``--inline``, ``--ncu``, ``--sanitize``.

Each flag is one argument here and one function; the launcher only calls :func:`add_flags`,
:func:`one_workload_mode` (before the benchmark) and :func:`dump_after_run` (after it).

- ``--inline``: one workload's call in this process (no worker), so ``breakpoint()`` and pdb in
  the kernel's Python work; prints the verdict.
- ``--dump DIR``: after the run, each failed workload (or, when all passed, each workload
  chosen with ``--workloads``) is called again here and its inputs, outputs and reference are
  written to ``DIR/<uuid8>/`` with ``diff.txt`` (where they differ most).
- ``--ncu [SECTIONS]``: one workload under Nsight Compute, only the solution's kernels (NVTX);
  prints the report path and a summary per kernel.
- ``--sanitize [TOOL]``: one workload under compute-sanitizer; prints each finding with the
  solution's file and line.

Example::

    p = argparse.ArgumentParser(); add_flags(p); a = p.parse_args(["--inline"])
    code = one_workload_mode(a, ws, filters=None, quick=False, console=console)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

from fib_core.compile.solution_errors import note_solution_error
from fib_core.compile.source_map import map_solution_paths
from fib_core.errors import ConfigError
from fib_core.paths import kit_root
from fib_core.project.debug_dump import dump_uuids, write_dump
from fib_core.project.debug_run import pick_workload, run_workspace_once, verdict_line
from fib_core.project.entry import display_path
from fib_core.project.ncu import import_command, parse_sections, profile_command, summarize_raw_csv
from fib_core.project.runflow import resolve_device
from fib_core.project.sanitizer import TOOLS, error_count, parse_findings, sanitizer_command

PROFILE_DIR = Path("runs") / "profiles"
TOOL_TIMEOUT_S = 1800


def add_flags(p: Any, gpu: Any = None) -> None:
    """The four debugging flags, on any argparse parser or argument group; ``gpu``: the
    group for the two that need a GPU's tools (--ncu, --sanitize), default ``p``."""
    gpu = p if gpu is None else gpu
    p.add_argument(
        "--dump",
        type=Path,
        metavar="DIR",
        help="write failed (or --workloads) workloads' inputs/outputs/reference here",
    )
    p.add_argument(
        "--inline",
        action="store_true",
        help="one workload in this process (no worker): breakpoint()/pdb work",
    )
    gpu.add_argument(
        "--ncu",
        nargs="?",
        const="default",
        metavar="SECTIONS",
        help="one workload under Nsight Compute (only the solution's kernels)",
    )
    gpu.add_argument(
        "--sanitize",
        nargs="?",
        const="memcheck",
        choices=TOOLS,
        metavar="TOOL",
        help=f"one workload under compute-sanitizer ({'|'.join(TOOLS)})",
    )


def requested_one_workload(a: argparse.Namespace) -> str | None:
    """The one-workload flag given (inline, ncu, sanitize), or None; two at once is an error."""
    given = [name for name in ("inline", "ncu", "sanitize") if getattr(a, name, None)]
    if len(given) > 1:
        raise ConfigError(f"--{given[0]} and --{given[1]}: use one debugging flag at a time")
    return given[0] if given else None


def one_workload_mode(
    a: argparse.Namespace,
    ws: Any,
    *,
    filters: list[str] | None,
    quick: bool,
    console: Any,
    config_path: Path,
) -> int | None:
    """Run the one-workload flag if one was given (its exit status), else None."""
    mode = requested_one_workload(a)
    if mode is None:
        return None
    workload = pick_workload(ws.trace_set, ws.definition.name, filters, quick)
    source_dir = _display(ws.cfg.source_dir)
    if mode == "inline":
        return _inline(ws, workload, a.device, console)
    child = child_command(config_path, workload.uuid, nvtx=mode == "ncu")
    if ws.cfg.track:  # a track fork: the child opens the same definition
        child += ["--definition", ws.cfg.solution.definition]
    if mode == "ncu":
        return _ncu(workload, child, a.ncu, console)
    return _sanitize(workload, child, a.sanitize, source_dir, console)


def child_command(config_path: Path, uuid: str, *, nvtx: bool) -> list[str]:
    """The Python command that makes one call of the solution on ``uuid`` (on the GPU)."""
    cmd = [
        sys.executable,
        "-P",  # not the current folder first on sys.path: this kit's fib_core, not one there
        "-m",
        "fib_core.project.debug_run",
        "--config",
        str(config_path),
        "--workload",
        uuid,
        "--device",
        "cuda",
    ]
    return cmd + ["--nvtx"] if nvtx else cmd


def child_env() -> dict[str, str]:
    """This environment, with the kit's folder first on PYTHONPATH: the child imports the same
    fib_core as this process, installed or not."""
    # The current folder after the kit, where `python -m` would have put it first (-P).
    paths = [str(kit_root()), os.getcwd(),
             *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def _inline(ws: Any, workload: Any, device: str | None, console: Any) -> int:
    kind = resolve_device(device)
    _interpret_triton_on_cpu(kind)
    console.print(
        f"inline: workload {workload.uuid} on {kind}, in this process (no worker, no "
        "timeout); breakpoint() in your kernel's Python stops here",
        highlight=False,
    )
    try:
        call = run_workspace_once(ws, workload, device=kind)
    except Exception as err:  # the solution's failure: its traceback, naming its own files
        print(solution_traceback(err, _display(ws.cfg.source_dir)), file=sys.stderr)
        return 1
    console.print(verdict_line(workload, call), highlight=False, soft_wrap=True)
    return 0 if call.check.passed else 1


def solution_traceback(err: BaseException, source_dir: str) -> str:
    """``err``'s whole traceback (its causes too) with the build copy's paths mapped to
    ``source_dir`` (``solution/triton/kernel.py``, not the private temporary copy), ending
    with the note that names the solution's line and Python's hint."""
    note_solution_error(err)
    text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    return map_solution_paths(text.rstrip(), source_dir)


def _require_gpu_tool(binary: str, what: str) -> str:
    path = shutil.which(binary)
    if path is None:
        raise ConfigError(
            f"{what}: `{binary}` not found on PATH; install the CUDA toolkit (it ships {binary}) "
            "and put its bin/ folder on PATH"
        )
    return path


def _ncu(workload: Any, child: list[str], sections_text: str, console: Any) -> int:
    sections = parse_sections(sections_text)
    binary = _require_gpu_tool("ncu", "--ncu")
    PROFILE_DIR.mkdir(parents=True, exist_ok=True)
    report = PROFILE_DIR / f"{workload.uuid[:8]}.ncu-rep"
    cmd = profile_command(report.with_suffix(""), child, sections, ncu=binary)
    console.print("running: " + " ".join(cmd), highlight=False, soft_wrap=True)
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, env=child_env()
    )
    if not report.is_file():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        console.print(tail, highlight=False, markup=False)
        raise ConfigError(
            f"--ncu: Nsight Compute wrote no report (exit {proc.returncode}); "
            "its last lines are above"
        )
    imported = subprocess.run(
        import_command(report, ncu=binary), capture_output=True, text=True, timeout=TOOL_TIMEOUT_S
    )
    kernels = summarize_raw_csv(imported.stdout)
    console.print(f"report: {report} (open it with ncu-ui)", highlight=False)
    if not kernels:
        console.print("no kernel was profiled inside the solution's NVTX range", highlight=False)
        return 1
    for k in kernels:
        console.print("  " + k.line(), highlight=False, markup=False, soft_wrap=True)
    return 0


def _sanitize(workload: Any, child: list[str], tool: str, source_dir: str, console: Any) -> int:
    binary = _require_gpu_tool("compute-sanitizer", "--sanitize")
    cmd = sanitizer_command(child, tool, binary=binary)
    console.print("running: " + " ".join(cmd), highlight=False, soft_wrap=True)
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, env=child_env()
    )
    output = proc.stdout + proc.stderr
    findings = parse_findings(output, source_dir)
    errors = error_count(output)
    for f in findings:
        console.print("  " + f.line(), highlight=False, markup=False, soft_wrap=True)
    verdict = [ln for ln in proc.stdout.splitlines() if ln.startswith(workload.uuid[:8])]
    if verdict:
        console.print(verdict[-1], highlight=False, markup=False, soft_wrap=True)
    console.print(
        f"{tool}: {errors if errors is not None else 'unknown number of'} error(s) on "
        f"workload {workload.uuid[:8]}",
        highlight=False,
    )
    return 0 if errors == 0 and proc.returncode == 0 else 1


def dump_after_run(
    folder: Path | None,
    ws: Any,
    traces: list[dict[str, Any]],
    *,
    chosen: bool,
    device: str | None,
    console: Any,
) -> None:
    """``--dump``: call the failed (or chosen) workloads again here and write their tensors."""
    if folder is None:
        return

    uuids = dump_uuids(traces, chosen)
    if not uuids:
        console.print(
            "--dump: every workload passed; pass --workloads to dump chosen ones", highlight=False
        )
        return
    by_uuid = {t.workload.uuid: t.workload for t in ws.trace_set.workloads[ws.definition.name]}
    kind = resolve_device(device)
    _interpret_triton_on_cpu(kind)
    for uuid in uuids:
        try:
            call = run_workspace_once(ws, by_uuid[uuid], device=kind)
        except Exception as err:  # a crashing kernel: say so and go on with the others
            console.print(
                f"--dump {uuid[:8]}: the call failed again ({type(err).__name__}: "
                f"{err}); nothing to dump",
                highlight=False,
                soft_wrap=True,
            )
            continue
        where = write_dump(folder / uuid[:8], call)
        console.print(f"dumped {uuid[:8]} to {where}", highlight=False)


def _interpret_triton_on_cpu(kind: str) -> None:
    """Without a GPU, Triton kernels run through its interpreter (as in the CPU smoke run)."""
    if kind == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"


def _display(path: Path) -> str:
    return display_path(path)


def modal_refusal(*, dump: str, inline: bool, ncu: str, sanitize: str) -> str | None:
    """The one-line reason ``run_modal.py`` gives for a debugging flag, or None if none given.

    Modal runs the benchmark in a container without a terminal attached (no debugger), and its
    GPUs do not expose the performance counters Nsight Compute reads nor let compute-sanitizer
    attach; ``--dump`` would need the tensors shipped back, which the launcher does not do.
    Every one of them works locally, ``--dump`` and ``--inline`` also on a CPU.
    """
    local = "python scripts/run_local.py"
    if inline:
        return (
            f"--inline is not available on Modal (no terminal for a debugger there); run "
            f"`{local} --inline --workloads <uuid>` here (it works on a CPU too)"
        )
    if ncu:
        return (
            f"--ncu is not available on Modal (its GPUs do not expose the counters Nsight "
            f"Compute reads); run `{local} --ncu --workloads <uuid>` on a machine with a GPU"
        )
    if sanitize:
        return (
            f"--sanitize is not available on Modal (compute-sanitizer cannot attach there); "
            f"run `{local} --sanitize {sanitize} --workloads <uuid>` on a machine with a GPU"
        )
    if dump:
        return (
            f"--dump is not available on Modal (the tensors stay in the container); run "
            f"`{local} --dump {dump} --workloads <uuid>` here (it works on a CPU too)"
        )
    return None
