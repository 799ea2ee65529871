"""Entry point: FP8 block-scale MoE with DeepSeek-V3 routing, in five launches, no host sync.

    route           one program per token: sigmoid, group top-2 sums, top-4 groups, top-8
                    experts, normalised weights; appends local pairs to per-expert lists
    gemm1_swiglu    grouped FP8 GEMM x @ W1^T over the local experts, SwiGLU and e4m3
                    re-quantisation of h fused in the epilogue
    gemm2_weighted  grouped FP8 GEMM h @ W2^T, times the routing weight, bf16 rows
    combine         per token, the sum of its (at most 8) local rows -> bf16 output
(plus the zero-fill of the 32 per-expert counters).

Sizes (hidden, intermediate, local experts, experts) come from the tensors' shapes, so the
same code runs on reduced problems; both sizes must be multiples of 128.
"""

from __future__ import annotations

import torch

from .combine import combine
from .grouped_gemm import gemm1_swiglu, gemm2_weighted
from .routing import route
from .tiles import TileConfig, pick_config


def moe_forward(
    routing_logits: torch.Tensor,
    routing_bias: torch.Tensor,
    hidden_states: torch.Tensor,
    hidden_states_scale: torch.Tensor,
    gemm1_weights: torch.Tensor,
    gemm1_weights_scale: torch.Tensor,
    gemm2_weights: torch.Tensor,
    gemm2_weights_scale: torch.Tensor,
    local_expert_offset: int,
    routed_scaling_factor: float,
    output: torch.Tensor,
    config: TileConfig | None = None,
) -> torch.Tensor:
    """Same as :func:`run`, with an optional tile config (for tuning); returns ``output``."""
    num_tokens, hidden = hidden_states.shape
    num_local, two_inter, _ = gemm1_weights.shape
    config = config or pick_config(num_tokens)
    config.check_sizes(hidden, two_inter // 2)
    if num_tokens == 0:
        return output
    routing = route(
        routing_logits, routing_bias, local_expert_offset, routed_scaling_factor, num_local
    )
    hq, hs = gemm1_swiglu(
        hidden_states, hidden_states_scale, gemm1_weights, gemm1_weights_scale, routing, config
    )
    y = gemm2_weighted(hq, hs, gemm2_weights, gemm2_weights_scale, routing, config)
    combine(y, routing, config.block_m, output)
    return output


def run(
    routing_logits,
    routing_bias,
    hidden_states,
    hidden_states_scale,
    gemm1_weights,
    gemm1_weights_scale,
    gemm2_weights,
    gemm2_weights_scale,
    local_expert_offset,
    routed_scaling_factor,
    output,
):
    """Destination-passing entry: the definition's inputs in order, then ``output`` [T, H] bf16."""
    moe_forward(
        routing_logits,
        routing_bias,
        hidden_states,
        hidden_states_scale,
        gemm1_weights,
        gemm1_weights_scale,
        gemm2_weights,
        gemm2_weights_scale,
        int(local_expert_offset),
        float(routed_scaling_factor),
        output,
    )
