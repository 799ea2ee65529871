"""FlashInfer's FP8 block-scale MoE (``trtllm_fp8_block_scale_moe``) -> apply.

Routed as ``moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048`` when the expert
counts, top-k, groups and sizes equal the definition's and the routing method is DeepSeek's
(or not given); the output is returned as FlashInfer returns it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..common import route_or_call, shape_of
from .function_call import FunctionAdapter

DEF_NAME = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"
CONSTANTS = {
    "num_experts": 256,
    "top_k": 8,
    "n_group": 8,
    "topk_group": 4,
    "intermediate_size": 2048,
    "local_num_experts": 32,
}
INPUTS = (
    "routing_logits",
    "routing_bias",
    "hidden_states",
    "hidden_states_scale",
    "gemm1_weights",
    "gemm1_weights_scale",
    "gemm2_weights",
    "gemm2_weights_scale",
    "local_expert_offset",
    "routed_scaling_factor",
)
DEEPSEEK_ROUTING = 2  # FlashInfer's RoutingMethodType.DeepSeekV3


def _deepseek_routing(value: Any) -> bool:
    if value is None:
        return True
    name = getattr(value, "name", None)
    return name == "DeepSeekV3" if name is not None else int(value) == DEEPSEEK_ROUTING


class MoEFP8BlockScaleAdapter(FunctionAdapter):
    """Targets and wrapper for FlashInfer's FP8 block-scale MoE entry point."""

    DEF_NAME = DEF_NAME
    NAME = "moe_fp8"
    FUNCTION = "trtllm_fp8_block_scale_moe"
    MODULE = "fused_moe"

    @staticmethod
    def fits(bound: dict[str, Any]) -> bool:
        hidden = shape_of(bound.get("hidden_states"))
        return (
            all(bound.get(k) == v for k, v in CONSTANTS.items())
            and hidden is not None
            and len(hidden) == 2
            and hidden[1] == 7168
            and all(name in bound for name in INPUTS)
            and _deepseek_routing(bound.get("routing_method_type"))
        )

    def call(
        self, bound: dict[str, Any], orig: Callable[..., Any], args: tuple, kwargs: dict[str, Any]
    ) -> Any:
        runtime_kwargs = {name: bound[name] for name in INPUTS}
        return route_or_call(self.def_name, runtime_kwargs, orig, args, kwargs)[1]
