"""Structured inputs: unit-length q and k, a warmed-up state and gates in the model's range."""

from __future__ import annotations

from typing import Any

from fib_core.dataset.generators import gdn_common_inputs


def generate(definition: Any, axes: dict[str, int], gen: Any, device: Any) -> dict[str, Any]:
    """q, k [B, 1, 4, 128], state [B, 8, 128, 128], A_log and dt_bias; v, a, b stay random."""
    batch = axes["batch_size"]
    return gdn_common_inputs(batch, gen, device, (batch, 1))
