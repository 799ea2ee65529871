"""Small helpers under the organizers' names (``fib_core.utils``), over the kit's own code.

>>> from fib_core.utils import torch_dtype_from_def, list_cuda_devices, env_snapshot
>>> torch_dtype_from_def("bfloat16")          # doctest: +SKIP
torch.bfloat16
>>> list_cuda_devices()                       # [] without a GPU, else ["cuda:0", ...]
[]
>>> env_snapshot("cpu").hardware              # doctest: +SKIP
'CPU (x86_64, ...)'
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from fib_core.bench.evaluation.environment import collect_environment
from fib_core.data.trace import Environment

__all__ = [
    "Environment",
    "env_snapshot",
    "hardware_from_device",
    "list_cuda_devices",
    "redirect_stdio_to_file",
    "torch_dtype_from_def",
]


def torch_dtype_from_def(dtype_str: str):  # noqa: ANN201 - torch.dtype; torch loads lazily
    """The torch dtype of a definition dtype name ("bfloat16", "float8_e4m3fn", ...)."""
    from fib_core.data.dtypes import torch_dtype

    return torch_dtype(dtype_str)


def list_cuda_devices() -> list[str]:
    """``["cuda:0", "cuda:1", ...]`` for the GPUs torch sees; ``[]`` without any."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    if not torch.cuda.is_available():
        return []
    return [f"cuda:{i}" for i in range(torch.cuda.device_count())]


def env_snapshot(device: str) -> Environment:
    """The ``Environment`` a trace records for ``device`` (hardware name, library versions),
    collected the way the benchmark worker collects it."""
    return collect_environment(device).to_environment()


def hardware_from_device(device: str) -> str:
    """The hardware name recorded in traces: the GPU's name, or a CPU description."""
    return collect_environment(device).hardware


def redirect_stdio_to_file(log_path: str) -> None:
    """Send this process's stdout and stderr (file descriptors 1 and 2, so output of native
    code too) to ``log_path``, appending; used at the start of a worker process."""
    path = Path(log_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)
