"""Adapters that send FlashInfer's calls of this contest's operators through apply and tracing.

``install_flashinfer_integrations()`` patches each entry point that exists in the installed
FlashInfer and skips the rest silently (FlashInfer absent: nothing happens). A patched call
becomes a function-mode ``apply`` of the matching definition: the tracer sees it, and with a
runtime enabled the recorded solution runs; otherwise (or when the call does not fit the
definition's constant sizes or options) the original FlashInfer function runs unchanged.

Covered entry points:

- ``gated_delta_rule_decode_pretranspose`` (``flashinfer.gdn_decode``): GDN decode with the
  k-last state, ``gdn_decode_qk4_v8_d128_k_last``. Routed when the state is passed directly
  (no pool indices, no intermediate-state buffer, state update on); with
  ``use_qk_l2norm=True`` q and k are L2-normalised before the solution runs (the
  definition takes normalised rows). The state is updated in place, as FlashInfer does.
- ``trtllm_fp8_block_scale_moe`` (``flashinfer.fused_moe``): the DeepSeek-routed FP8
  block-scale MoE, ``moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048``, when the
  expert counts, top-k, groups and sizes equal the definition's.

Not covered: FlashInfer's GDN prefill (``chunk_gated_delta_rule``) takes precomputed gates
(g, beta), not the definition's A_log/a/dt_bias/b; the DSA kernels have no stable public entry
point to patch. Call ``apply`` in the model code for those.
"""

from __future__ import annotations

import functools
import importlib.util
import math
from collections.abc import Callable
from typing import Any

from fib_core.apply import apply
from fib_core.apply.binding import ArgBinder

from .patch import PatchSpec, get_manager

GDN_DECODE = "gdn_decode_qk4_v8_d128_k_last"
MOE = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"

_FELL_BACK = object()


def route_or_call(
    def_name: str,
    runtime_kwargs: dict[str, Any],
    original: Callable[..., Any],
    args: tuple,
    kwargs: dict[str, Any],
) -> tuple[bool, Any]:
    """Function-mode apply with the original call as fallback: (routed?, result)."""
    held: dict[str, Any] = {}

    def fallback(**_: Any) -> Any:
        held["result"] = original(*args, **kwargs)
        return _FELL_BACK

    result = apply(def_name, runtime_kwargs=runtime_kwargs, fallback=fallback)
    if result is _FELL_BACK:
        return False, held["result"]
    return True, result


def _shape(value: Any) -> tuple[int, ...] | None:
    shape = getattr(value, "shape", None)
    return None if shape is None else tuple(shape)


def gdn_decode_wrapper(original: Callable[..., Any], spec: PatchSpec) -> Callable[..., Any]:
    binder = ArgBinder(original)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = binder.bind(args, kwargs)
        q_shape, v_shape = _shape(bound.get("q")), _shape(bound.get("v"))
        state = bound.get("state")
        fits = (
            q_shape is not None
            and v_shape is not None
            and len(q_shape) == 4
            and q_shape[1:] == (1, 4, 128)
            and _shape(bound.get("k")) == q_shape
            and v_shape == (q_shape[0], 1, 8, 128)
            and _shape(state) == (q_shape[0], 8, 128, 128)
            and all(
                bound.get(name) is None
                for name in (
                    "initial_state",
                    "initial_state_indices",
                    "output_state_indices",
                    "intermediate_states_buffer",
                )
            )
            and not bound.get("disable_state_update", False)
        )
        if not fits:
            return original(*args, **kwargs)
        q, k = bound["q"], bound["k"]
        if bound.get("use_qk_l2norm", True):
            import torch.nn.functional as F

            q = F.normalize(q.float(), dim=-1).to(q.dtype)
            k = F.normalize(k.float(), dim=-1).to(k.dtype)
        scale = bound.get("scale")
        runtime_kwargs = {
            "q": q,
            "k": k,
            "v": bound["v"],
            "state": state,
            "A_log": bound["A_log"],
            "a": bound["a"],
            "dt_bias": bound["dt_bias"],
            "b": bound["b"],
            "scale": 1.0 / math.sqrt(128) if scale is None else float(scale),
        }
        routed, result = route_or_call(GDN_DECODE, runtime_kwargs, original, args, kwargs)
        if not routed:
            return result
        output, new_state = result
        state.copy_(new_state)
        given = bound.get("output")
        if given is not None:
            given.copy_(output)
            output = given
        return output, state

    return wrapper


MOE_CONSTANTS = {
    "num_experts": 256,
    "top_k": 8,
    "n_group": 8,
    "topk_group": 4,
    "intermediate_size": 2048,
    "local_num_experts": 32,
}
MOE_INPUTS = (
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


def _deepseek_routing(value: Any) -> bool:
    if value is None:
        return True
    name = getattr(value, "name", None)
    return name == "DeepSeekV3" if name is not None else int(value) == 2


def moe_wrapper(original: Callable[..., Any], spec: PatchSpec) -> Callable[..., Any]:
    binder = ArgBinder(original)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = binder.bind(args, kwargs)
        hidden = _shape(bound.get("hidden_states"))
        fits = (
            all(bound.get(k) == v for k, v in MOE_CONSTANTS.items())
            and hidden is not None
            and len(hidden) == 2
            and hidden[1] == 7168
            and all(name in bound for name in MOE_INPUTS)
            and _deepseek_routing(bound.get("routing_method_type"))
        )
        if not fits:
            return original(*args, **kwargs)
        runtime_kwargs = {name: bound[name] for name in MOE_INPUTS}
        _, result = route_or_call(MOE, runtime_kwargs, original, args, kwargs)
        return result

    return wrapper


ADAPTERS: list[tuple[PatchSpec, Callable[..., Any]]] = [
    (
        PatchSpec(
            "flashinfer.gdn_decode.gated_delta_rule_decode_pretranspose", "function", "gdn_decode"
        ),
        gdn_decode_wrapper,
    ),
    (
        PatchSpec("flashinfer.gated_delta_rule_decode_pretranspose", "function", "gdn_decode"),
        gdn_decode_wrapper,
    ),
    (
        PatchSpec("flashinfer.fused_moe.trtllm_fp8_block_scale_moe", "function", "moe_fp8"),
        moe_wrapper,
    ),
    (
        PatchSpec("flashinfer.trtllm_fp8_block_scale_moe", "function", "moe_fp8"),
        moe_wrapper,
    ),
]


def install_flashinfer_integrations() -> list[str]:
    """Patch every covered FlashInfer entry point that exists; returns the patched paths.

    Safe to call more than once; returns [] when FlashInfer is not installed::

        from fib_core.integration import install_flashinfer_integrations
        install_flashinfer_integrations()
    """
    if importlib.util.find_spec("flashinfer") is None:
        return []
    manager = get_manager()
    installed = []
    for spec, factory in ADAPTERS:
        try:
            ok = manager.patch(spec, factory)
        except Exception:  # a FlashInfer that fails to import part of itself: skip quietly
            ok = False
        if ok:
            installed.append(spec.path)
    return installed
