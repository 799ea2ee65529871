"""FlashInfer baseline of the DeepSeek-V3 FP8 block-scale MoE definition: one call of FlashInfer's
``trtllm_fp8_block_scale_moe`` (TensorRT-LLM's fused kernels; SM100 only), routing included.

256 experts in 8 groups, 4 groups kept, top 8 experts per token (DeepSeek-V3 routing); this rank
holds 32 experts from ``local_expert_offset``; weights are K-major, not shuffled.
"""

import torch
from flashinfer.fused_moe import RoutingMethodType, trtllm_fp8_block_scale_moe

NUM_EXPERTS = 256
TOP_K = 8
NUM_GROUPS = 8
GROUPS_KEPT = 4


def _number(value, kind):
    return kind(value.item()) if isinstance(value, torch.Tensor) else kind(value)


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
):
    local_experts = gemm1_weights.shape[0]
    intermediate = gemm2_weights.shape[2]
    output = trtllm_fp8_block_scale_moe(
        routing_logits=routing_logits,
        routing_bias=routing_bias,
        hidden_states=hidden_states,
        hidden_states_scale=hidden_states_scale,
        gemm1_weights=gemm1_weights,
        gemm1_weights_scale=gemm1_weights_scale,
        gemm2_weights=gemm2_weights,
        gemm2_weights_scale=gemm2_weights_scale,
        num_experts=NUM_EXPERTS,
        top_k=TOP_K,
        n_group=NUM_GROUPS,
        topk_group=GROUPS_KEPT,
        intermediate_size=intermediate,
        local_expert_offset=_number(local_expert_offset, int),
        local_num_experts=local_experts,
        routed_scaling_factor=_number(routed_scaling_factor, float),
        routing_method_type=RoutingMethodType.DeepSeekV3,
        use_shuffled_weight=False,
    )
    # Older FlashInfer releases return [output].
    return output[0] if isinstance(output, (list, tuple)) else output
