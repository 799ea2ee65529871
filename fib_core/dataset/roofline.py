"""Roofline floors: the least time a workload can take on a GPU, from bytes moved and FLOPs done.

A speedup over the reference says little about how good a kernel is; "78% of what the GPU
allows" does. Each definition folder's ``cost.py`` counts the *minimum* traffic
(each input read once, each output written once, and only the parts the math needs: the
selected cache rows, the pages a request uses, the weights of experts some token chose) and the
FLOPs of the math itself. :func:`roofline_floor_ms` divides by the GPU's datasheet peaks.

Costs come from the axes alone (expected values where the data decides, e.g. how many experts
are chosen), or exactly when the workload's input tensors are passed as ``inputs``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

# --- GPU peaks ------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuPeak:
    """Datasheet peaks of one GPU: memory bandwidth and *dense* tensor-core throughput."""

    name: str
    bandwidth_gbs: float
    bf16_tflops: float
    fp8_tflops: float

    def __post_init__(self) -> None:
        for field_name in ("bandwidth_gbs", "bf16_tflops", "fp8_tflops"):
            value = getattr(self, field_name)
            if not (isinstance(value, int | float) and value > 0):
                raise ValueError(f"GpuPeak {self.name!r}: {field_name} must be > 0, got {value!r}")

    def tflops(self, dtype: str) -> float:
        """Peak for a compute dtype: FP8 tensor cores for fp8 types, BF16 ones otherwise
        (fp32-state kernels such as GDN run their matrix math on BF16/TF32 tensor cores)."""
        return self.fp8_tflops if dtype.startswith("float8") else self.bf16_tflops


# Dense (no 2:4 sparsity) figures from the vendor datasheets.
GPU_PEAKS: dict[str, GpuPeak] = {
    peak.name: peak
    for peak in (
        GpuPeak("H100 SXM", bandwidth_gbs=3350, bf16_tflops=989.4, fp8_tflops=1978.9),
        GpuPeak("H100 PCIe", bandwidth_gbs=2000, bf16_tflops=756.0, fp8_tflops=1513.0),
        GpuPeak("H100 NVL", bandwidth_gbs=3900, bf16_tflops=835.0, fp8_tflops=1670.0),
        GpuPeak("H200", bandwidth_gbs=4800, bf16_tflops=989.4, fp8_tflops=1978.9),
        GpuPeak("H200 NVL", bandwidth_gbs=4800, bf16_tflops=835.0, fp8_tflops=1670.0),
        GpuPeak("B200", bandwidth_gbs=8000, bf16_tflops=2250.0, fp8_tflops=4500.0),
    )
}

# Most specific patterns first: "H100 NVL" must not be read as an H100 SXM.
_NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\bh200\b.*\bnvl\b", "H200 NVL"),
    (r"\bh200\b", "H200"),
    (r"\bh100\b.*\bnvl\b", "H100 NVL"),
    (r"\bh100\b.*\bpcie\b", "H100 PCIe"),
    (r"\bh100\b", "H100 SXM"),  # "NVIDIA H100 80GB HBM3" is the SXM part
    (r"\bb200\b", "B200"),
)


def detect_gpu_peak(device_name: str | None) -> GpuPeak | None:
    """The peaks of a GPU from its device name (``torch.cuda.get_device_name()``), or None."""
    if not device_name:
        return None
    text = device_name.lower()
    for pattern, key in _NAME_PATTERNS:
        if re.search(pattern, text):
            return GPU_PEAKS[key]
    return None


# --- costs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    """Minimum bytes moved and FLOPs done by one workload; ``dtype`` picks the compute peak."""

    bytes: int
    flops: int
    dtype: str

    def __post_init__(self) -> None:
        if self.bytes < 0 or self.flops < 0:
            raise ValueError(f"Cost: bytes and flops must be >= 0, got {self.bytes}, {self.flops}")
        if not self.dtype:
            raise ValueError("Cost: dtype must name the compute dtype, e.g. 'bfloat16'")

    def achieved_gbs(self, latency_ms: float) -> float:
        """Bandwidth a kernel of this latency achieved, in GB/s."""
        return self.bytes / (latency_ms * 1e-3) / 1e9

    def achieved_tflops(self, latency_ms: float) -> float:
        """Throughput a kernel of this latency achieved, in TFLOP/s."""
        return self.flops / (latency_ms * 1e-3) / 1e12


class RooflineFloor(NamedTuple):
    """``(floor_ms, bound)``; ``float(floor)`` gives the milliseconds alone."""

    ms: float
    bound: str  # "memory" | "compute"

    def __float__(self) -> float:
        return float(self.ms)


def roofline_floor_ms(cost: Cost, peak: GpuPeak) -> RooflineFloor:
    """The slower of moving ``cost.bytes`` at peak bandwidth and doing ``cost.flops`` at peak
    throughput, and which of the two it was (ties count as memory-bound)."""
    memory_ms = cost.bytes / (peak.bandwidth_gbs * 1e9) * 1e3
    compute_ms = cost.flops / (peak.tflops(cost.dtype) * 1e12) * 1e3
    if compute_ms > memory_ms:
        return RooflineFloor(compute_ms, "compute")
    return RooflineFloor(memory_ms, "memory")


def roofline_fraction(cost: Cost, peak: GpuPeak, latency_ms: float) -> float:
    """floor / measured latency: 1.0 means the kernel runs at the hardware's limit."""
    return roofline_floor_ms(cost, peak).ms / latency_ms


# Byte sizes of the dtypes the definitions' cost models count in.
BYTES: dict[str, int] = {
    "float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "bool": 1,
}

# GDN: decay S, k@S, two rank-1 updates, q@S: ~7 K*V flops per head and token (K = V = 128).
GDN_HEAD_FLOPS = 7 * 128 * 128


def workload_cost(
    definition_name: str, axes: Mapping[str, int], inputs: Mapping[str, Any] | None = None
) -> Cost:
    """Minimum bytes and FLOPs of one workload, from the definition folder's ``cost.py``.

    ``axes`` needs the definition's var axes (const axes are known to the model). ``inputs``
    (name -> tensor or scalar, optional) makes the data-dependent parts exact: the valid sparse
    indices, the sequence lengths, the MoE routing. Raises KeyError for a definition without a
    cost model (no roofline column for it).

    Example::

        workload_cost("gdn_decode_qk4_v8_d128_k_last", {"batch_size": 1}).bytes  # 1_054_816
    """
    from fib_core.dataset import registry  # here: cost.py files import this module (cycle)

    entry = registry.get(definition_name)
    model = entry.cost if entry is not None else None
    if model is None:
        raise KeyError(f"no cost model for definition {definition_name!r}")
    return model(axes, inputs)


def workload_size(definition_name: str, axes: Mapping[str, int]) -> float:
    """One number for how big a workload is: its cost model's bytes plus FLOPs, from the axes.

    Not a time (bytes and FLOPs are added as they are), only an order: the quick subset of an
    untagged dataset takes the smallest, and the queue several GPUs share splits its lanes by
    it. Raises KeyError for a definition without a cost model, as :func:`workload_cost` does.

    >>> workload_size("gdn_decode_qk4_v8_d128_k_last", {"batch_size": 1})
    1972320.0
    """
    cost = workload_cost(definition_name, axes)
    return float(cost.bytes + cost.flops)


def __getattr__(name: str) -> Any:
    """``KNOWN_DEFINITIONS``: the registered definitions that have a cost model."""
    if name == "KNOWN_DEFINITIONS":
        # Imported here: the registry loads the definition folders, whose cost.py files import
        # this module (a cycle at import time).
        from fib_core.dataset import registry

        return tuple(e.name for e in registry.entries() if e.cost is not None)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
