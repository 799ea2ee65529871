"""Structured inputs: unit-length q and k, a warmed-up state and gates in the model's range."""

from __future__ import annotations

from typing import Any

from fib_core.dataset.generators import gdn_common_inputs, gdn_gate_params


def generate(
    definition: Any, axes: dict[str, int], gen: Any, device: Any, sets: int | None = None
) -> dict[str, Any]:
    """q, k [B, 1, 4, 128], state [B, 8, 128, 128], A_log and dt_bias; v, a, b stay random.

    ``sets=n`` draws n sets at once (the timed-only ones): the rows of n batches in one go,
    each set's tensors a slice of them, and n sets of gate parameters.
    """
    batch = axes["batch_size"]
    if sets is None:
        return gdn_common_inputs(batch, gen, device, (batch, 1))
    rows = sets * batch
    drawn = gdn_common_inputs(rows, gen, device, (rows, 1))
    a_log, dt_bias = gdn_gate_params(8 * sets, gen, device)
    return {
        "q": drawn["q"].view(sets, batch, 1, 4, -1),
        "k": drawn["k"].view(sets, batch, 1, 4, -1),
        "state": drawn["state"].view(sets, batch, *drawn["state"].shape[1:]),
        "A_log": a_log.view(sets, 8),
        "dt_bias": dt_bias.view(sets, 8),
    }
