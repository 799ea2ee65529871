"""FlashInfer's ``BatchPrefillWithPagedKVCacheWrapper`` (plan/run) -> apply.

Naming rule: a run after ``plan(..., num_qo_heads=H, num_kv_heads=K, head_dim_qk=D,
page_size=P, causal=C)`` is routed as ``gqa_paged_prefill_causal_h{H}_kv{K}_d{D}_ps{P}``
when C is true and ``gqa_paged_prefill_h{H}_kv{K}_d{D}_ps{P}`` otherwise, with inputs ``q``
[tokens, H, D], ``k_cache``/``v_cache`` [pages, P, K, D] (NHD), ``qo_indptr``, ``kv_indptr``,
``kv_indices``, ``kv_last_page_len`` (only when P > 1) and ``sm_scale``. A plan whose value
size differs from D, or with a custom mask, positional encoding, sliding window or soft cap,
is not routed. Without the definition in the dataset FlashInfer's ``run`` runs unchanged.
"""

from __future__ import annotations

from typing import Any

from .gqa_paged_decode import paged_runtime_kwargs
from .plan_run import PLAN_DEFAULTS, PlanRunAdapter, plain


class GQAPagedPrefillAdapter(PlanRunAdapter):
    """Targets and wrappers for ``flashinfer.BatchPrefillWithPagedKVCacheWrapper``."""

    WRAPPER_CLASS = "flashinfer.BatchPrefillWithPagedKVCacheWrapper"
    NAME = "gqa_paged_prefill"

    def __init__(self) -> None:
        super().__init__()

    def record_plan(self, inst: Any, bound: dict[str, Any]) -> dict[str, Any] | None:
        head_dim = int(bound["head_dim_qk"])
        head_dim_vo = bound.get("head_dim_vo")
        if not plain(bound, PLAN_DEFAULTS) or head_dim_vo not in (None, head_dim):
            return None
        return {
            "qo_indptr": bound["qo_indptr"],
            "kv_indptr": bound["paged_kv_indptr"],
            "kv_indices": bound["paged_kv_indices"],
            "kv_last_page_len": bound["paged_kv_last_page_len"],
            "num_qo_heads": int(bound["num_qo_heads"]),
            "num_kv_heads": int(bound["num_kv_heads"]),
            "head_dim": head_dim,
            "page_size": int(bound["page_size"]),
            "causal": bool(bound.get("causal", False)),
            "sm_scale": bound.get("sm_scale"),
        }

    def def_name(self, plan: dict[str, Any]) -> str:
        mask = "_causal" if plan["causal"] else ""
        return (
            f"{self.NAME}{mask}_h{plan['num_qo_heads']}_kv{plan['num_kv_heads']}"
            f"_d{plan['head_dim']}_ps{plan['page_size']}"
        )

    def runtime_kwargs(
        self, inst: Any, plan: dict[str, Any], bound: dict[str, Any]
    ) -> dict[str, Any] | None:
        return paged_runtime_kwargs(
            inst, plan, bound, ("qo_indptr", "kv_indptr", "kv_indices")
        )
