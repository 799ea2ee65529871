"""FlashInfer's ``BatchPrefillWithRaggedKVCacheWrapper`` (plan/run) -> apply.

Naming rule: a run after ``plan(..., num_qo_heads=H, num_kv_heads=K, head_dim_qk=D,
causal=C)`` is routed as ``gqa_ragged_prefill_causal_h{H}_kv{K}_d{D}`` when C is true and
``gqa_ragged_prefill_h{H}_kv{K}_d{D}`` otherwise, with inputs ``q`` [tokens, H, D], ``k`` and
``v`` [kv_tokens, K, D] (NHD), ``qo_indptr``, ``kv_indptr`` and ``sm_scale``. Plans with a
different value size, a custom mask, positional encoding, window or soft cap are not routed;
without the definition in the dataset FlashInfer's ``run`` runs unchanged.
"""

from __future__ import annotations

from typing import Any

from ..common import (
    infer_kv_layout_from_args,
    infer_ragged_kv_layout_from_tensors,
    normalize_ragged_kv_to_nhd,
    pick_sm_scale_gqa,
)
from .plan_run import GQAAdapter, given_scale


class RaggedPrefillAdapter(GQAAdapter):
    """Targets and wrappers for ``flashinfer.BatchPrefillWithRaggedKVCacheWrapper``."""

    WRAPPER_CLASS = "flashinfer.BatchPrefillWithRaggedKVCacheWrapper"
    NAME = "gqa_ragged_prefill"

    CAUSAL = True
    PLAN_TENSORS = {"qo_indptr": "qo_indptr", "kv_indptr": "kv_indptr"}

    def runtime_kwargs(
        self, inst: Any, plan: dict[str, Any], bound: dict[str, Any]
    ) -> dict[str, Any] | None:
        k, v = bound.get("k"), bound.get("v")
        heads = plan["num_kv_heads"]
        layout = infer_kv_layout_from_args(inst) or infer_ragged_kv_layout_from_tensors(k, heads)
        if layout is None or k is None or v is None:
            return None
        return {
            "q": bound["q"],
            "k": normalize_ragged_kv_to_nhd(k, layout),
            "v": normalize_ragged_kv_to_nhd(v, layout),
            "qo_indptr": plan["qo_indptr"],
            "kv_indptr": plan["kv_indptr"],
            "sm_scale": pick_sm_scale_gqa(plan["head_dim"], given_scale(plan, bound)),
        }
