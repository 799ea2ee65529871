"""The machine a run measures on: which device it uses, and the environment fingerprint
recorded with every trace (hardware, clocks, driver, versions).

:func:`resolve_device` turns ``--device`` into the device itself; the launcher, the engine and
each worker and judge ask it, the launcher before any of those processes exists, so it counts
GPUs without starting the CUDA driver.

Collected once per worker (it runs ``nvidia-smi`` at most once, with a short timeout), so a
result can always be traced back to the machine and software that produced it. A worker starts
``nvidia-smi`` (:func:`start_smi`) before it imports torch and reads it afterwards, so the
tool's start (0.03 s on an H200 machine, more on a busy or slower one) is not added after
the import, on the way to the run's first workload.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import fib_core


@dataclass
class EnvironmentInfo:
    """What the worker found: device kind and name, library versions, clocks."""

    device_kind: str
    hardware: str
    libs: dict[str, str] = field(default_factory=dict)
    clocks: dict[str, Any] = field(default_factory=dict)

    def to_environment(self) -> Any:
        # Imported here: the trace schema loads pydantic (~150 ms), which a launcher asking
        # resolve_device does not need.
        from fib_core.data.trace import Environment

        return Environment(hardware=self.hardware, libs=dict(self.libs))


def collect_environment(device: str, smi: subprocess.Popen | None = None) -> EnvironmentInfo:
    """Probe the device the worker runs on; never raises for a missing tool. ``smi``: an
    ``nvidia-smi`` already started for this device (:func:`start_smi`), read here instead of
    starting one.

    Example: ``collect_environment("cpu").device_kind == "cpu"``."""
    # Imported here: torch costs a second or more, and the worker imports it on its own
    # thread (head start) before it asks.
    import torch

    kind = device.split(":")[0]
    libs = {"torch": torch.__version__, "python": platform.python_version(),
            "fib_core": fib_core.__version__}
    triton_version = _module_version("triton")
    if triton_version:
        libs["triton"] = triton_version
    clocks: dict[str, Any] = {}
    if kind == "cuda":
        index = torch.device(device).index or 0
        hardware = torch.cuda.get_device_name(index)
        libs["cuda"] = str(torch.version.cuda)
        cap = torch.cuda.get_device_capability(index)
        libs["compute_capability"] = f"{cap[0]}.{cap[1]}"
        smi_fields = read_smi(smi if smi is not None else start_smi(index))
        if "driver_version" in smi_fields:
            libs["driver"] = smi_fields.pop("driver_version")
        clocks = smi_fields
    else:
        drop_smi(smi)  # started for a GPU that turned out not to be used
        hardware = f"CPU ({platform.machine()}, {_cpu_name()})"
    return EnvironmentInfo(kind, hardware, libs, clocks)


def resolve_device(requested: str) -> str:
    """'auto' -> 'cuda:0' when a GPU is visible, else 'cpu'; 'cuda' -> 'cuda:0'.

    GPUs are counted as ``torch.cuda.device_count`` counts them (through NVML, where torch
    can), not with ``is_available``, which starts the CUDA driver: 0.46 s against 0.03 s
    with two H200s, paid by every launcher before it hands its run over, though only the
    judge and the worker make CUDA contexts (a driver that fails then fails there, and
    says so)."""
    import torch  # imported here: a call pays for torch, importing this module does not

    def visible() -> bool:
        return torch.backends.cuda.is_built() and torch.cuda.device_count() > 0

    if requested == "auto":
        requested = "cuda" if visible() else "cpu"
    if requested == "cuda":
        if not visible():
            from fib_core.errors import ConfigError  # only on this error path

            raise ConfigError("--device cuda was asked for, but torch sees no CUDA GPU here")
        return "cuda:0"
    return requested


def _module_version(name: str) -> str | None:
    from importlib import metadata  # imported here: ~50 ms, only the worker's probe needs it

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


_SMI_FIELDS = (
    "driver_version",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "clocks.max.mem",
    "power.limit",
    "temperature.gpu",
)


def start_smi(index: int) -> subprocess.Popen | None:
    """Start ``nvidia-smi`` for GPU ``index`` (current and max SM/memory clocks, power limit,
    temperature, driver) without waiting for it; None where there is no such tool.

    Example: ``read_smi(start_smi(0)).get("driver_version")``."""
    exe = shutil.which("nvidia-smi")
    target = smi_id(index, os.environ)
    if exe is None or target is None:
        return None
    try:
        return subprocess.Popen(
            [exe, f"--id={target}", f"--query-gpu={','.join(_SMI_FIELDS)}",
             "--format=csv,noheader,nounits"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True,
        )
    except OSError:
        return None


def drop_smi(proc: subprocess.Popen | None) -> None:
    """Stop an ``nvidia-smi`` whose answer is not wanted, and reap it."""
    if proc is None:
        return
    try:
        proc.kill()
    except OSError:
        pass
    proc.communicate()


def visible_entries(env: Mapping[str, str]) -> list[str] | None:
    """The GPUs ``CUDA_VISIBLE_DEVICES`` lets CUDA see, in CUDA's order; None when it is unset
    (every GPU). Read as CUDA does: entries up to the first one that is not a device
    (ordinals, written as CUDA accepts them, or ``GPU-``/``MIG-`` identifiers of the first
    entry's kind), none at all when one repeats. The one reading of that variable: what a
    CUDA index means outside this process, and how many GPUs a launcher will see.

    >>> visible_entries({"CUDA_VISIBLE_DEVICES": "4, +05,x,1"}), visible_entries({})
    (['4', '5'], None)
    >>> visible_entries({"CUDA_VISIBLE_DEVICES": "1,1"}), visible_entries({"CUDA_VISIBLE_DEVICES": ""})
    ([], [])
    """
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return None
    entries = [part.strip() for part in listed.split(",")]
    prefix = next((p for p in ("GPU-", "MIG-") if entries[0].startswith(p)), None)
    seen: list[str] = []
    for entry in entries:
        if prefix is not None:
            key = entry if entry.startswith(prefix) else None
        else:
            digits = entry[1:] if entry[:1] == "+" else entry
            digits = digits[: len(digits) - len(digits.lstrip("0123456789"))]
            key = str(int(digits)) if digits else None
        if key is None:
            break
        if key in seen:
            return []
        seen.append(key)
    return seen


def smi_id(index: int, env: Mapping[str, str]) -> str | None:
    """How ``nvidia-smi --id`` names the GPU CUDA calls ``index`` in this process: CUDA counts
    only the GPUs ``CUDA_VISIBLE_DEVICES`` lists, nvidia-smi counts them all (a run's second
    GPU process sees its GPU as 0). None for a MIG instance or an entry past the list. A
    number is read in nvidia-smi's (PCI) order: CUDA's order is the same unless the machine
    mixes GPU models and ``CUDA_DEVICE_ORDER`` is not ``PCI_BUS_ID``, where the clocks of
    another GPU may then be recorded.

    >>> smi_id(0, {"CUDA_VISIBLE_DEVICES": "3,1"}), smi_id(1, {}), smi_id(2, {"CUDA_VISIBLE_DEVICES": "0"})
    ('3', '1', None)
    """
    entries = visible_entries(env)
    if entries is None:
        return str(index)
    if index >= len(entries):
        return None
    entry = entries[index]
    return entry if entry.isdigit() or entry.startswith("GPU-") else None


def read_smi(proc: subprocess.Popen | None, timeout: float = 5.0) -> dict[str, Any]:
    """What :func:`start_smi`'s ``nvidia-smi`` printed, keyed like ``clocks_sm`` (empty if it
    failed or took over ``timeout`` seconds, then it is killed)."""
    if proc is None:
        return {}
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        drop_smi(proc)
        return {}
    except (OSError, ValueError):
        return {}
    out = (out or "").strip()
    if proc.returncode != 0 or not out:
        return {}
    values = [v.strip() for v in out.splitlines()[0].split(",")]
    return {key.replace(".", "_"): value
            for key, value in zip(_SMI_FIELDS, values, strict=False)}
