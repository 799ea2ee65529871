"""FlashInfer's ``BatchMLAPagedAttentionWrapper`` (plan/run) -> apply.

Naming rule: a run after ``plan(qo_indptr, ..., num_heads=H, head_dim_ckv=C, head_dim_kpe=R,
page_size=P, causal=...)`` is routed as ``mla_paged_decode_h{H}_ckv{C}_kpe{R}_ps{P}`` when
every request has one query token, else ``mla_paged_prefill_causal_h{H}_ckv{C}_kpe{R}_ps{P}``
(``mla_paged_prefill_h...`` without the causal mask). Inputs: ``q_nope`` [tokens, H, C],
``q_pe`` [tokens, H, R], ``ckv_cache`` [pages, P, C], ``kpe_cache`` [pages, P, R],
``kv_indptr``, ``kv_indices`` (prefill adds ``qo_indptr``) and ``sm_scale``. The scale must
come from the caller (FlashInfer's plan takes it): with weight absorption C is the latent size,
not the q.k head size the scale is based on, so no default is guessed and a call without one
is not routed. Without the definition in the dataset FlashInfer's ``run`` runs unchanged.
"""

from __future__ import annotations

from typing import Any

from ..common import pick_sm_scale_mla
from .plan_run import PlanRunAdapter, given_scale


def _all_single_token(qo_indptr: Any) -> bool:
    """True when every request has exactly one query token (a decode batch)."""
    values = qo_indptr.tolist() if hasattr(qo_indptr, "tolist") else list(qo_indptr)
    return len(values) > 1 and all(values[i + 1] - values[i] == 1 for i in range(len(values) - 1))


class MLAPagedAdapter(PlanRunAdapter):
    """Targets and wrappers for ``flashinfer.BatchMLAPagedAttentionWrapper``."""

    WRAPPER_CLASS = "flashinfer.BatchMLAPagedAttentionWrapper"
    NAME = "mla_paged"

    def record_plan(self, inst: Any, bound: dict[str, Any]) -> dict[str, Any] | None:
        decode = _all_single_token(bound["qo_indptr"])
        return {
            "qo_indptr": bound["qo_indptr"],
            "kv_indptr": bound["kv_indptr"],
            "kv_indices": bound["kv_indices"],
            "num_heads": int(bound["num_heads"]),
            "head_dim_ckv": int(bound["head_dim_ckv"]),
            "head_dim_kpe": int(bound["head_dim_kpe"]),
            "page_size": int(bound["page_size"]),
            "decode": decode,
            "causal": bool(bound.get("causal", False)),
            "sm_scale": bound.get("sm_scale"),
        }

    def def_name(self, plan: dict[str, Any]) -> str:
        if plan["decode"]:
            kind = "decode"
        else:
            kind = "prefill_causal" if plan["causal"] else "prefill"
        return (
            f"{self.NAME}_{kind}_h{plan['num_heads']}_ckv{plan['head_dim_ckv']}"
            f"_kpe{plan['head_dim_kpe']}_ps{plan['page_size']}"
        )

    def runtime_kwargs(
        self, inst: Any, plan: dict[str, Any], bound: dict[str, Any]
    ) -> dict[str, Any] | None:
        scale = given_scale(plan, bound)
        if scale is None:
            return None
        kwargs = {
            "q_nope": bound["q_nope"],
            "q_pe": bound["q_pe"],
            "ckv_cache": bound["ckv_cache"],
            "kpe_cache": bound["kpe_cache"],
            "kv_indptr": plan["kv_indptr"],
            "kv_indices": plan["kv_indices"],
        }
        if not plan["decode"]:
            kwargs["qo_indptr"] = plan["qo_indptr"]
        kwargs["sm_scale"] = pick_sm_scale_mla(plan["head_dim_ckv"], plan["head_dim_kpe"], scale)
        return kwargs
