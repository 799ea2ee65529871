"""Will a workload's tensors fit? Asked before any of them is allocated.

A workload whose axes ask for terabytes (a typo, ``n = 10**12``) would otherwise fail deep in
the allocator with a C++ message, or, on a machine that overcommits memory, be killed by the
kernel's out-of-memory killer half-way through filling its inputs. Summing the definition's
shapes first gives a readable reason instead, as the workload's RUNTIME_ERROR.
"""

from __future__ import annotations

import os
from typing import Any

from fib_core.data.dtypes import element_bytes
from fib_core.errors import FibError


class WorkloadTooLargeError(FibError):
    """The workload's inputs and outputs need more memory than the device has."""


def tensor_bytes(definition: Any, axes: dict[str, int]) -> tuple[int, list[tuple[str, int]]]:
    """(total bytes, [(tensor name, bytes)] largest first) of the inputs and outputs."""
    shapes = {**definition.input_shapes(axes), **definition.output_shapes(axes)}
    specs = {**definition.inputs, **definition.outputs}
    sizes = []
    for name, shape in shapes.items():
        if shape is None:
            continue
        count = 1
        for dim in shape:
            count *= dim
        sizes.append((name, count * element_bytes(specs[name].dtype)))
    sizes.sort(key=lambda item: -item[1])
    return sum(b for _, b in sizes), sizes


def device_memory_bytes(device: str) -> int | None:
    """Total memory of ``device`` ("cpu", "cuda", "cuda:1"); None when it cannot be read."""
    try:
        if device.startswith("cuda"):
            # Imported here: torch takes ~3 s to load, and importing this module does not need it.
            import torch

            return int(torch.cuda.mem_get_info(torch.device(device))[1])
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, RuntimeError, AttributeError):
        return None


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def check_fits(definition: Any, workload: Any, device: str) -> None:
    """Raise :class:`WorkloadTooLargeError` when one set of the workload's inputs and outputs
    needs more than the device's whole memory."""
    axes = dict(definition.const_axes)
    axes.update(workload.axes)
    total, sizes = tensor_bytes(definition, axes)
    limit = device_memory_bytes(device)
    if limit is None or total <= limit:
        return
    largest = ", ".join(f"{name} {human_bytes(b)}" for name, b in sizes[:3])
    shown = ", ".join(f"{k}={v}" for k, v in workload.axes.items())
    raise WorkloadTooLargeError(
        f"workload {workload.uuid} ({shown}) needs {human_bytes(total)} for its inputs and "
        f"outputs ({largest}), more than the {human_bytes(limit)} of {device.split(':')[0]} "
        "memory; check the workload's axes"
    )
