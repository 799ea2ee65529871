"""The environment fingerprint recorded with every trace: hardware, clocks, driver, versions.

Collected once per worker (it runs ``nvidia-smi`` at most once, with a short timeout), so a
result can always be traced back to the machine and software that produced it.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any


@dataclass
class EnvironmentInfo:
    """What the worker found: device kind and name, library versions, clocks."""

    device_kind: str
    hardware: str
    libs: dict[str, str] = field(default_factory=dict)
    clocks: dict[str, Any] = field(default_factory=dict)

    def to_environment(self) -> Any:
        from fib_core.data.trace import Environment

        return Environment(hardware=self.hardware, libs=dict(self.libs))


def collect_environment(device: str) -> EnvironmentInfo:
    """Probe the device the worker runs on; never raises for a missing tool."""
    import torch

    import fib_core

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
        smi = _nvidia_smi(index)
        if "driver_version" in smi:
            libs["driver"] = smi.pop("driver_version")
        clocks = smi
    else:
        hardware = f"CPU ({platform.machine()}, {_cpu_name()})"
    return EnvironmentInfo(kind, hardware, libs, clocks)


def _module_version(name: str) -> str | None:
    from importlib import metadata

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


def _nvidia_smi(index: int) -> dict[str, Any]:
    """Current and max SM/memory clocks, power limit, temperature, driver (empty if no tool)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    try:
        out = subprocess.run(
            [exe, f"--id={index}", f"--query-gpu={','.join(_SMI_FIELDS)}",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in out.splitlines()[0].split(",")] if out else []
    result: dict[str, Any] = {}
    for key, value in zip(_SMI_FIELDS, values, strict=False):
        result[key.replace(".", "_")] = value
    return result
