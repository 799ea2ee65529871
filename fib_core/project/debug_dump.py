"""``--dump DIR``: a failed workload's inputs, the kernel's outputs and the reference's, on disk.

For each dumped workload, ``DIR/<uuid8>/`` receives ``inputs.safetensors``,
``outputs.safetensors`` (the kernel's), ``reference.safetensors`` and ``diff.txt``: the
verdict and, per output, the elements where kernel and reference differ most (index, got,
expected, absolute error). Open them with ``safetensors.torch.load_file`` next to your kernel.
The call is made again in this process by :mod:`fib_core.project.debug_run` (set 0 of the
workload, as the benchmark's first check).

Example::

    from fib_core.project.debug_dump import write_dump
    write_dump(Path("dump") / "3f2a91c0", call)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fib_core.bench.evaluation.compare import unravel_index
from fib_core.errors import ConfigError

TOP_DIFFERENCES = 10


def tensors_only(named: dict[str, Any]) -> dict[str, Any]:
    """The tensor entries, detached, contiguous and on the CPU (what safetensors can store);
    scalars go to ``diff.txt`` instead."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    out = {}
    for name, value in named.items():
        if isinstance(value, torch.Tensor):
            out[name] = value.detach().contiguous().cpu()
    return out


def largest_differences(got: Any, want: Any, k: int = TOP_DIFFERENCES) -> list[str]:
    """Up to ``k`` lines "index got expected |err|", largest error first (non-finite first)."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    if not isinstance(got, torch.Tensor) or not isinstance(want, torch.Tensor):
        return [f"got {got!r}, expected {want!r}"]
    if got.shape != want.shape:
        return [f"shape {tuple(got.shape)}, expected {tuple(want.shape)}"]
    a = got.detach().cpu().to(torch.float64).reshape(-1)
    b = want.detach().cpu().to(torch.float64).reshape(-1)
    err = (a - b).abs()
    bad = ~torch.isfinite(a) | ~torch.isfinite(b)
    err = torch.where(bad & ~(a == b), torch.full_like(err, float("inf")), err)
    err = torch.nan_to_num(err, nan=float("inf"))
    order = torch.argsort(err, descending=True)[:k]
    lines = []
    for flat in order.tolist():
        if err[flat] == 0:
            break
        index = unravel_index(flat, tuple(got.shape))
        lines.append(
            f"{index}  got {a[flat].item():.6g}  expected {b[flat].item():.6g}  "
            f"|err| {err[flat].item():.4g}"
        )
    return lines or ["identical"]


def check_dump_folder(folder: Path) -> None:
    """``--dump DIR`` read before the run: a file in its place, or a folder that cannot be
    made, must not cost a finished benchmark."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--dump {folder}: is a file; pass a folder (it is made if missing)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"--dump {folder}: cannot make the folder ({err.strerror}); pass "
                          "another one") from None


def write_dump(folder: Path, call: Any) -> Path:
    """Write one workload's tensors and ``diff.txt`` into ``folder`` (created)."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    for name, named in (
        ("inputs", call.inputs),
        ("outputs", call.outputs),
        ("reference", call.reference),
    ):
        tensors = tensors_only(named)
        if tensors:
            save_file(tensors, str(folder / f"{name}.safetensors"))
    status = getattr(call.check.status, "value", call.check.status)
    lines = [f"verdict: {status}", f"message: {call.check.message or '-'}", ""]
    scalars = {k: v for k, v in call.inputs.items() if k not in tensors_only(call.inputs)}
    if scalars:
        lines += [f"scalar inputs: {scalars}", ""]
    for name, want in call.reference.items():
        lines.append(f"output {name!r}: largest differences (index, got, expected, |err|)")
        lines += [f"  {line}" for line in largest_differences(call.outputs.get(name), want)]
        lines.append("")
    (folder / "diff.txt").write_text("\n".join(lines))
    return folder


def dump_uuids(traces: list[dict[str, Any]], chosen: bool) -> list[str]:
    """Failed workloads' uuids; when none failed and the user chose workloads, those."""
    failed = [
        t["workload"]["uuid"]
        for t in traces
        if (t.get("evaluation") or {}).get("status") != "PASSED"
    ]
    if failed or not chosen:
        return failed
    return [t["workload"]["uuid"] for t in traces]
