"""One workload, one call, in this process: the debugging path under ``--inline``, ``--dump``,
``--ncu`` and ``--sanitize``.

The benchmark runs every solution call in a worker process (a crash or hang must not take the
run down), which also means ``breakpoint()`` and pdb cannot reach the kernel's Python. Here
the same steps run in the current process, once: build, inputs (set 0, as the benchmark's
first check), reference, one call of the solution, the benchmark's own output check. No
timing, no worker, no timeout: a debugger can stop anywhere.

Run as a module it is the child that Nsight Compute and compute-sanitizer launch::

    python -m fib_core.project.debug_run --config config.toml --workload 3f2a91c0 --nvtx

Example (what ``run_local.py --inline`` does)::

    call = run_once(ws, workload, device="cuda")
    print(call.check.status, call.check.message)
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Any

from fib_core.bench.config import BenchmarkConfig
from fib_core.bench.evaluation.check import check_outputs, poison_
from fib_core.bench.evaluation.reference import clone_args, reference_outputs
from fib_core.bench.evaluation.tolerance import resolve_tolerance
from fib_core.compile import BuildOptions, build
from fib_core.dataset.selection import select_workloads
from fib_core.errors import ConfigError
from fib_core.project.runflow import build_settings, resolve_device

# The NVTX range around the solution's call: Nsight Compute profiles only kernels inside it.
NVTX_RANGE = "fib_solution"


@dataclass
class OneCall:
    """What one call produced: tensors by name, on the device they were made on."""

    inputs: dict[str, Any]
    outputs: dict[str, Any]
    reference: dict[str, Any]
    check: Any  # fib_core.bench.evaluation.check.CheckResult


def pick_workload(trace_set: Any, definition: str, filters: list[str] | None, quick: bool) -> Any:
    """The one workload a debugging flag works on: the first the filters (or --quick) select."""
    records = trace_set.workloads.get(definition, [])
    chosen = select_workloads(records, filters, quick=quick or not filters)
    if not chosen:
        raise ConfigError(f"no workload of {definition} matches --workloads {filters}")
    return chosen[0].workload


def run_once(
    definition: Any,
    solution: Any,
    workload: Any,
    *,
    device: str,
    dataset_root: str | None,
    seed: int = 0,
    build_options: Any = None,
    nvtx: bool = False,
) -> OneCall:
    """Build, make input set 0, run the reference and the solution once, check the outputs."""
    # Imported here: fib_core.bench.evaluation.inputs loads pydantic (~50 ms); this module's import does not.
    from fib_core.bench.evaluation.inputs import generate_inputs

    runnable = build(solution, definition, build_options)
    inputs = generate_inputs(
        definition, workload, seed=seed, device=device, dataset_root=dataset_root
    )
    reference, _ = reference_outputs(
        definition, workload, inputs, seed=seed, device=device, input_set=0, cache=None
    )
    outputs = _new_outputs(definition, workload, device, poison_) if runnable.dps else None
    args = clone_args(inputs)
    if nvtx:
        # Imported here: torch takes ~3 s to load, and importing this module does not need it.
        import torch

        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(NVTX_RANGE)
    got = runnable.run(args, outputs)
    if nvtx:
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    elif device.startswith("cuda"):
        # Imported here: torch takes ~3 s to load, and importing this module does not need it.
        import torch

        torch.cuda.synchronize()
    tol = resolve_tolerance(definition, BenchmarkConfig(device=device, seed=seed))
    check = check_outputs(definition, got, reference, tolerance=tol, inputs=inputs)
    return OneCall(
        inputs=dict(zip(definition.input_names, inputs, strict=True)),
        outputs=dict(zip(definition.output_names, got, strict=False)),
        reference=dict(zip(definition.output_names, reference, strict=True)),
        check=check,
    )


def _new_outputs(definition: Any, workload: Any, device: str, poison: Any) -> list:
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    # Imported here: fib_core.data.dtypes loads pydantic (~50 ms); this module's import does not.
    from fib_core.data.dtypes import torch_dtype

    shapes = definition.output_shapes(dict(workload.axes))
    outs: list[Any] = []
    for name, spec in definition.outputs.items():
        shape = shapes[name]
        outs.append(
            None
            if shape is None
            else poison(torch.empty(shape, dtype=torch_dtype(spec.dtype), device=device))
        )
    return outs


def run_workspace_once(ws: Any, workload: Any, *, device: str, nvtx: bool = False) -> OneCall:
    """:func:`run_once` for the fork's packed solution, with config.toml's seed and build flags."""
    return run_once(
        ws.definition,
        ws.pack(),
        workload,
        device=device,
        dataset_root=str(ws.dataset_path),
        seed=ws.cfg.benchmark.seed or 0,
        build_options=BuildOptions(**build_settings(ws.cfg)),
        nvtx=nvtx,
    )


def verdict_line(workload: Any, call: OneCall) -> str:
    status = getattr(call.check.status, "value", call.check.status)
    text = f"{workload.uuid[:8]} {status}"
    return f"{text}: {call.check.message}" if call.check.message else text


def main(argv: list[str] | None = None) -> int:
    """The child entry of --ncu / --sanitize: one workload's call, its verdict on stdout."""
    # Imported here: fib_core.project.workspace loads pydantic (~50 ms); this module's import does not.
    from fib_core.project.workspace import open_workspace

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="config.toml")
    p.add_argument("--workload", required=True, help="uuid or prefix")
    p.add_argument("--device", choices=["cuda", "cpu"])
    p.add_argument("--nvtx", action="store_true", help=f"wrap the call in NVTX '{NVTX_RANGE}'")
    p.add_argument("--definition", help="one definition of a track fork (default: config's)")
    a = p.parse_args(argv)
    device = resolve_device(a.device)
    if device == "cpu":  # Triton kernels through the interpreter, as in the CPU smoke run
        os.environ["TRITON_INTERPRET"] = "1"
    ws = open_workspace(a.config, a.definition)
    workload = pick_workload(ws.trace_set, ws.definition.name, [a.workload], False)
    call = run_workspace_once(ws, workload, device=device, nvtx=a.nvtx)
    print(verdict_line(workload, call))
    return 0 if call.check.passed else 1


if __name__ == "__main__":
    from fib_core.project.entry import run_script

    run_script(lambda: main(sys.argv[1:]))
