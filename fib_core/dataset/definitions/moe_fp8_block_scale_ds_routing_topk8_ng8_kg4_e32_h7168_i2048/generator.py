"""Structured inputs: routing logits with unbalanced expert popularity, a small bias."""

from __future__ import annotations

from typing import Any

from fib_core.dataset.generators import moe_routing


def generate(definition: Any, axes: dict[str, int], gen: Any, device: Any) -> dict[str, Any]:
    """routing_logits [T, 256] and routing_bias [256]; the FP8 activations and weights stay random."""
    logits, bias = moe_routing(axes["seq_len"], 256, gen, device)
    return {"routing_logits": logits, "routing_bias": bias}
