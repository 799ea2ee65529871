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
from .plan_run import PLAN_DEFAULTS, PlanRunAdapter, given_scale, plain


class RaggedPrefillAdapter(PlanRunAdapter):
    """Targets and wrappers for ``flashinfer.BatchPrefillWithRaggedKVCacheWrapper``."""

    WRAPPER_CLASS = "flashinfer.BatchPrefillWithRaggedKVCacheWrapper"
    NAME = "gqa_ragged_prefill"

    def __init__(self) -> None:
        super().__init__()

    def record_plan(self, inst: Any, bound: dict[str, Any]) -> dict[str, Any] | None:
        head_dim = int(bound["head_dim_qk"])
        head_dim_vo = bound.get("head_dim_vo")
        if not plain(bound, PLAN_DEFAULTS) or head_dim_vo not in (None, head_dim):
            return None
        return {
            "qo_indptr": bound["qo_indptr"],
            "kv_indptr": bound["kv_indptr"],
            "num_qo_heads": int(bound["num_qo_heads"]),
            "num_kv_heads": int(bound["num_kv_heads"]),
            "head_dim": head_dim,
            "causal": bool(bound.get("causal", False)),
            "sm_scale": bound.get("sm_scale"),
        }

    def def_name(self, plan: dict[str, Any]) -> str:
        mask = "_causal" if plan["causal"] else ""
        return (
            f"{self.NAME}{mask}_h{plan['num_qo_heads']}_kv{plan['num_kv_heads']}"
            f"_d{plan['head_dim']}"
        )

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
