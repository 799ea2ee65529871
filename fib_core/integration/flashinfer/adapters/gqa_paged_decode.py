"""FlashInfer's ``BatchDecodeWithPagedKVCacheWrapper`` (plan/run) -> apply.

Naming rule: a run after ``plan(..., num_qo_heads=H, num_kv_heads=K, head_dim=D, page_size=P)``
is routed as ``gqa_paged_decode_h{H}_kv{K}_d{D}_ps{P}``, e.g.
``gqa_paged_decode_h32_kv8_d128_ps1``, with inputs ``q`` [batch, H, D], ``k_cache`` and
``v_cache`` [pages, P, K, D] (NHD, whatever the wrapper's layout), ``kv_indptr``,
``kv_indices``, ``kv_last_page_len`` (only when P > 1) and ``sm_scale``. The solution returns
``output`` (and optionally ``lse``); they land in ``out``/``lse`` when the caller gave them.
Without such a definition in the dataset the call runs FlashInfer's ``run`` unchanged.
"""

from __future__ import annotations

from typing import Any

from ..common import (
    infer_kv_layout_from_args,
    infer_paged_kv_layout_from_tensors,
    normalize_paged_kv_to_nhd,
    pick_sm_scale_gqa,
)
from .plan_run import PLAN_DEFAULTS, PlanRunAdapter, given_scale, plain


def split_paged_cache(inst: Any, paged_kv_cache: Any, num_kv_heads: int) -> tuple[Any, Any] | None:
    """(k_cache, v_cache) in NHD from a (k, v) pair or one [pages, 2, ...] tensor; None if the
    layout cannot be told."""
    layout = infer_kv_layout_from_args(inst) or infer_paged_kv_layout_from_tensors(
        paged_kv_cache, num_kv_heads
    )
    if layout is None:
        return None
    cache = normalize_paged_kv_to_nhd(paged_kv_cache, layout)
    if isinstance(cache, (tuple, list)):
        return (cache[0], cache[1]) if len(cache) == 2 else None
    if len(getattr(cache, "shape", ())) != 5:
        return None
    return cache[:, 0], cache[:, 1]


def paged_runtime_kwargs(
    inst: Any, plan: dict[str, Any], bound: dict[str, Any], index_keys: tuple[str, ...]
) -> dict[str, Any] | None:
    """The routed call's inputs for a paged GQA wrapper (decode and prefill alike): ``q``, the
    NHD ``k_cache``/``v_cache``, the plan's index tensors named in ``index_keys``,
    ``kv_last_page_len`` when pages hold more than one token, and ``sm_scale``."""
    caches = split_paged_cache(inst, bound.get("paged_kv_cache"), plan["num_kv_heads"])
    if caches is None:
        return None
    kwargs = {"q": bound["q"], "k_cache": caches[0], "v_cache": caches[1]}
    kwargs.update((key, plan[key]) for key in index_keys)
    if plan["page_size"] > 1:
        kwargs["kv_last_page_len"] = plan["kv_last_page_len"]
    kwargs["sm_scale"] = pick_sm_scale_gqa(plan["head_dim"], given_scale(plan, bound))
    return kwargs


class GQAPagedDecodeAdapter(PlanRunAdapter):
    """Targets and wrappers for ``flashinfer.BatchDecodeWithPagedKVCacheWrapper``."""

    WRAPPER_CLASS = "flashinfer.BatchDecodeWithPagedKVCacheWrapper"
    NAME = "gqa_paged_decode"

    def __init__(self) -> None:
        super().__init__()

    def record_plan(self, inst: Any, bound: dict[str, Any]) -> dict[str, Any] | None:
        if not plain(bound, PLAN_DEFAULTS):
            return None
        return {
            "kv_indptr": bound["indptr"],
            "kv_indices": bound["indices"],
            "kv_last_page_len": bound["last_page_len"],
            "num_qo_heads": int(bound["num_qo_heads"]),
            "num_kv_heads": int(bound["num_kv_heads"]),
            "head_dim": int(bound["head_dim"]),
            "page_size": int(bound["page_size"]),
            "sm_scale": bound.get("sm_scale"),
        }

    def def_name(self, plan: dict[str, Any]) -> str:
        return (
            f"{self.NAME}_h{plan['num_qo_heads']}_kv{plan['num_kv_heads']}"
            f"_d{plan['head_dim']}_ps{plan['page_size']}"
        )

    def runtime_kwargs(
        self, inst: Any, plan: dict[str, Any], bound: dict[str, Any]
    ) -> dict[str, Any] | None:
        return paged_runtime_kwargs(inst, plan, bound, ("kv_indptr", "kv_indices"))
