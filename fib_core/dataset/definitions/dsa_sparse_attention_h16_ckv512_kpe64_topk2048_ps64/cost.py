"""Roofline cost: the queries, the distinct cache rows selected, the output and its LSE."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fib_core.dataset.roofline import BYTES, Cost

TOPK = 2048
HEADS, D_CKV, D_KPE = 16, 512, 64


def cost(axes: Mapping[str, int], inputs: Mapping[str, Any] | None) -> Cost:
    """Each distinct selected row read once; q.k over 576 values then p.v over 512 per pair."""
    n = axes["num_tokens"]
    if inputs is not None and inputs.get("sparse_indices") is not None:
        idx = inputs["sparse_indices"]
        valid = idx[idx != -1]
        pairs = int(valid.numel())  # (token, row) pairs: attention work
        rows = int(valid.unique().numel())  # distinct cache rows: traffic
    else:
        pairs = rows = n * TOPK  # every row valid, no two tokens sharing one
    bf16, f32, i32 = BYTES["bfloat16"], BYTES["float32"], BYTES["int32"]
    read = n * HEADS * (D_CKV + D_KPE) * bf16 + n * TOPK * i32 + rows * (D_CKV + D_KPE) * bf16
    written = n * HEADS * D_CKV * bf16 + n * HEADS * f32
    flops = pairs * HEADS * 2 * ((D_CKV + D_KPE) + D_CKV)
    return Cost(read + written, flops, "bfloat16")
