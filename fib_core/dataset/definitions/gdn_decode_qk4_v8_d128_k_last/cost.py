"""Roofline cost: the fp32 state read and written once per request dominates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fib_core.dataset.roofline import BYTES, GDN_HEAD_FLOPS, Cost

QK_HEADS, V_HEADS, DIM = 4, 8, 128


def cost(axes: Mapping[str, int], inputs: Mapping[str, Any] | None) -> Cost:
    """q, k, v, gates and the state in; output and new state out."""
    b = axes["batch_size"]
    bf16, f32 = BYTES["bfloat16"], BYTES["float32"]
    state = b * V_HEADS * DIM * DIM * f32
    read = b * (2 * QK_HEADS * DIM + V_HEADS * DIM) * bf16 + state + 2 * V_HEADS * f32
    read += 2 * b * V_HEADS * bf16
    written = b * V_HEADS * DIM * bf16 + state
    return Cost(read + written, b * V_HEADS * GDN_HEAD_FLOPS, "bfloat16")
