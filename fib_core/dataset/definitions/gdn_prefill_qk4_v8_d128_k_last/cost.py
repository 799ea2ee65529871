"""Roofline cost: every token's q, k, v and gates, one state per sequence in and out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fib_core.dataset.roofline import BYTES, GDN_HEAD_FLOPS, Cost

QK_HEADS, V_HEADS, DIM = 4, 8, 128


def cost(axes: Mapping[str, int], inputs: Mapping[str, Any] | None) -> Cost:
    """Token traffic plus the states and cu_seqlens; the recurrence's flops per head-token."""
    t, n = axes["total_seq_len"], axes["num_seqs"]
    bf16, f32, i64 = BYTES["bfloat16"], BYTES["float32"], BYTES["int64"]
    state = n * V_HEADS * DIM * DIM * f32
    read = (
        t * (2 * QK_HEADS * DIM + V_HEADS * DIM) * bf16
        + state
        + 2 * V_HEADS * f32
        + 2 * t * V_HEADS * bf16
        + (n + 1) * i64
    )
    written = t * V_HEADS * DIM * bf16 + state
    return Cost(read + written, t * V_HEADS * GDN_HEAD_FLOPS, "bfloat16")
