"""FP8 MoE's workloads: seq_len and the real local_expert_offset of each contest workload, in order.

The offset is an extra column that becomes a scalar input; the routing logits and bias are a
blob per workload, with the unbalanced expert popularity real routing has.
"""

from __future__ import annotations

from typing import Any

COLUMNS = ("seq_len", "local_expert_offset")
# fmt: off
ROWS = [
        (7,192), (1,32), (32,32), (80,96), (901,96), (16,224), (15,32), (14,0), (14107,32),
        (11948,128), (62,96), (59,160), (58,64), (57,96), (56,64), (55,128), (54,128),
        (53,32), (52,160)
]
# fmt: on

BLOB_INPUTS = ("routing_logits", "routing_bias")


def scalars(row: dict[str, int]) -> dict[str, float | int]:
    """The workload's real local_expert_offset (an extra column) and the scaling factor."""
    # Imported here: fib_core.dataset.generators loads torch (~3 s); this module's import does not.
    from fib_core.dataset.generators import ROUTED_SCALING_FACTOR

    return {
        "local_expert_offset": row["local_expert_offset"],
        "routed_scaling_factor": ROUTED_SCALING_FACTOR,
    }


def blobs(axes: dict[str, int], gen: Any) -> dict[str, Any]:
    """Unbalanced routing logits and a small balancing bias."""
    # Imported here: fib_core.dataset.generators loads torch (~3 s); this module's import does not.
    from fib_core.dataset.generators import moe_routing

    logits, bias = moe_routing(axes["seq_len"], 256, gen)
    return {"routing_logits": logits, "routing_bias": bias}
