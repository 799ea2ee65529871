"""Roofline floors: the least time a workload can take on a GPU, from bytes moved and FLOPs done.

A speedup over the reference says little about how good a kernel is; "78% of what the GPU
allows" does. For each contest definition :func:`workload_cost` counts the *minimum* traffic
(each input read once, each output written once, and only the parts the math needs: the
selected cache rows, the pages a request uses, the weights of experts some token chose) and the
FLOPs of the math itself. :func:`roofline_floor_ms` divides by the GPU's datasheet peaks.

Costs come from the axes alone (expected values where the data decides, e.g. how many experts
are chosen), or exactly when the workload's input tensors are passed as ``inputs``.
"""

from __future__ import annotations

import math
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


# Byte sizes of the dtypes used below.
_BF16, _F32, _I32, _I64, _FP8 = 2, 4, 4, 8, 1

PAGE = 64
TOPK = 2048


def _dsa_attention(axes: Mapping[str, int], inputs: Mapping[str, Any] | None) -> Cost:
    n = axes["num_tokens"]
    heads, d_ckv, d_kpe = 16, 512, 64
    if inputs is not None and inputs.get("sparse_indices") is not None:
        idx = inputs["sparse_indices"]
        valid = idx[idx != -1]
        pairs = int(valid.numel())  # (token, row) pairs: attention work
        rows = int(valid.unique().numel())  # distinct cache rows: traffic
    else:
        pairs = rows = n * TOPK  # every row valid, no two tokens sharing one
    read = n * heads * (d_ckv + d_kpe) * _BF16 + n * TOPK * _I32 + rows * (d_ckv + d_kpe) * _BF16
    written = n * heads * d_ckv * _BF16 + n * heads * _F32
    # per (token, head, row): q.k over 576 values, then p * v over 512 values
    flops = pairs * heads * 2 * ((d_ckv + d_kpe) + d_ckv)
    return Cost(read + written, flops, "bfloat16")


def _dsa_indexer(axes: Mapping[str, int], inputs: Mapping[str, Any] | None) -> Cost:
    batch, max_pages = axes["batch_size"], axes["max_num_pages"]
    heads, dim = 64, 128
    if inputs is not None and inputs.get("seq_lens") is not None:
        lens = [int(v) for v in inputs["seq_lens"].tolist()]
        pages = sum(-(-length // PAGE) for length in lens)
        tokens = sum(lens)
    else:  # lengths unknown: tables half full on average
        pages = batch * (max_pages + 1) / 2
        tokens = pages * PAGE
    read = (
        batch * heads * dim * _FP8
        + batch * heads * _F32
        + batch * _I32
        + batch * max_pages * _I32
        + pages * PAGE * (dim + 4)
    )
    written = batch * TOPK * _I32
    flops = tokens * heads * 2 * dim  # the relu/weight/sum epilogue is noise next to this
    return Cost(int(read + written), int(flops), "float8_e4m3fn")


_GDN_HEAD_FLOPS = 7 * 128 * 128  # decay S, k@S, two rank-1 updates, q@S: ~7 K*V per head-token


def _gdn_decode(axes: Mapping[str, int], inputs: Mapping[str, Any] | None) -> Cost:
    b = axes["batch_size"]
    qk, hv, d = 4, 8, 128
    state = b * hv * d * d * _F32
    read = b * (2 * qk * d + hv * d) * _BF16 + state + 2 * hv * _F32 + 2 * b * hv * _BF16
    written = b * hv * d * _BF16 + state
    return Cost(read + written, b * hv * _GDN_HEAD_FLOPS, "bfloat16")


def _gdn_prefill(axes: Mapping[str, int], inputs: Mapping[str, Any] | None) -> Cost:
    t, n = axes["total_seq_len"], axes["num_seqs"]
    qk, hv, d = 4, 8, 128
    state = n * hv * d * d * _F32
    read = (
        t * (2 * qk * d + hv * d) * _BF16
        + state
        + 2 * hv * _F32
        + 2 * t * hv * _BF16
        + (n + 1) * _I64
    )
    written = t * hv * d * _BF16 + state
    return Cost(read + written, t * hv * _GDN_HEAD_FLOPS, "bfloat16")


_MOE_E, _MOE_LOCAL, _MOE_H, _MOE_I, _MOE_TOPK = 256, 32, 7168, 2048, 8


def _moe_routing_counts(inputs: Mapping[str, Any]) -> tuple[int, int] | None:
    """(local experts chosen by >= 1 token, local (token, expert) pairs) from the real routing."""
    needed = ("routing_logits", "routing_bias", "local_expert_offset")
    if any(inputs.get(k) is None for k in needed):
        return None
    from fib_core.dataset.references import load_reference

    route = load_reference("moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048")["_route"]
    chosen, _ = route(inputs["routing_logits"], inputs["routing_bias"], 1.0)
    first = int(inputs["local_expert_offset"])
    local = chosen[(chosen >= first) & (chosen < first + _MOE_LOCAL)]
    return int(local.unique().numel()), int(local.numel())


def _moe(axes: Mapping[str, int], inputs: Mapping[str, Any] | None) -> Cost:
    t = axes["seq_len"]
    h, inter = _MOE_H, _MOE_I
    counts = _moe_routing_counts(inputs) if inputs is not None else None
    if counts is not None:
        active, pairs = counts
    else:  # uniform routing: each token picks 8 of 256, so 1/32 chance per local expert
        miss = 1.0 - _MOE_TOPK / _MOE_E
        active = _MOE_LOCAL * (1.0 - miss**t)
        pairs = t * _MOE_TOPK * _MOE_LOCAL / _MOE_E
    expert_bytes = (2 * inter * h + h * inter) * _FP8 + (
        (2 * inter // 128) * (h // 128) + (h // 128) * (inter // 128)
    ) * _F32
    read = (
        t * _MOE_E * _F32
        + _MOE_E * _BF16
        + t * h * _FP8
        + (h // 128) * t * _F32
        + active * expert_bytes
    )
    written = t * h * _BF16
    flops = pairs * 2 * (h * 2 * inter + inter * h)
    return Cost(int(math.ceil(read + written)), int(flops), "float8_e4m3fn")


_COSTS = {
    "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64": _dsa_attention,
    "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64": _dsa_indexer,
    "gdn_decode_qk4_v8_d128_k_last": _gdn_decode,
    "gdn_prefill_qk4_v8_d128_k_last": _gdn_prefill,
    "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048": _moe,
}

KNOWN_DEFINITIONS = tuple(_COSTS)


def workload_cost(
    definition_name: str, axes: Mapping[str, int], inputs: Mapping[str, Any] | None = None
) -> Cost:
    """Minimum bytes and FLOPs of one workload of a contest definition.

    ``axes`` needs the definition's var axes (const axes are known here). ``inputs`` (name ->
    tensor or scalar, optional) makes the data-dependent parts exact: the valid sparse indices,
    the sequence lengths, the MoE routing. Raises KeyError for a definition it has no model of.
    """
    try:
        model = _COSTS[definition_name]
    except KeyError:
        raise KeyError(f"no cost model for definition {definition_name!r}") from None
    return model(axes, inputs)
