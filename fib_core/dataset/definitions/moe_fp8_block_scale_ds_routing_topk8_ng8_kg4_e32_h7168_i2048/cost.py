"""Roofline cost: the weights of the local experts some token chose, read once, dominate."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fib_core.dataset import registry
from fib_core.dataset.roofline import BYTES, Cost

NAME = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"
EXPERTS, LOCAL, HIDDEN, INTER, TOPK = 256, 32, 7168, 2048, 8


def routing_counts(inputs: Mapping[str, Any]) -> tuple[int, int] | None:
    """(local experts chosen by >= 1 token, local (token, expert) pairs) from the real routing."""
    needed = ("routing_logits", "routing_bias", "local_expert_offset")
    if any(inputs.get(k) is None for k in needed):
        return None

    route = registry.get(NAME).load_reference()["_route"]
    chosen, _ = route(inputs["routing_logits"], inputs["routing_bias"], 1.0)
    first = int(inputs["local_expert_offset"])
    local = chosen[(chosen >= first) & (chosen < first + LOCAL)]
    return int(local.unique().numel()), int(local.numel())


def cost(axes: Mapping[str, int], inputs: Mapping[str, Any] | None) -> Cost:
    """Exact with the routing inputs; expected values under uniform routing without them."""
    t = axes["seq_len"]
    counts = routing_counts(inputs) if inputs is not None else None
    if counts is not None:
        active, pairs = counts
    else:  # uniform routing: each token picks 8 of 256, so 1/32 chance per local expert
        miss = 1.0 - TOPK / EXPERTS
        active = LOCAL * (1.0 - miss**t)
        pairs = t * TOPK * LOCAL / EXPERTS
    fp8, f32, bf16 = BYTES["float8_e4m3fn"], BYTES["float32"], BYTES["bfloat16"]
    blocks = (2 * INTER // 128) * (HIDDEN // 128) + (HIDDEN // 128) * (INTER // 128)
    expert_bytes = (2 * INTER * HIDDEN + HIDDEN * INTER) * fp8 + blocks * f32
    read = (
        t * EXPERTS * f32
        + EXPERTS * bf16
        + t * HIDDEN * fp8
        + (HIDDEN // 128) * t * f32
        + active * expert_bytes
    )
    written = t * HIDDEN * bf16
    flops = pairs * 2 * (HIDDEN * 2 * INTER + INTER * HIDDEN)
    return Cost(int(math.ceil(read + written)), int(flops), "float8_e4m3fn")
