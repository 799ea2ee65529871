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
from .plan_run import GQAAdapter, given_scale


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


class PagedGQAAdapter(GQAAdapter):
    """The paged GQA wrappers (decode and prefill): the routed call gets ``q``, the NHD
    ``k_cache``/``v_cache``, plan's index tensors, ``kv_last_page_len`` when pages hold more
    than one token, and ``sm_scale``."""

    PAGED = True

    def runtime_kwargs(
        self, inst: Any, plan: dict[str, Any], bound: dict[str, Any]
    ) -> dict[str, Any] | None:
        caches = split_paged_cache(inst, bound.get("paged_kv_cache"), plan["num_kv_heads"])
        if caches is None:
            return None
        kwargs = {"q": bound["q"], "k_cache": caches[0], "v_cache": caches[1]}
        kwargs.update((key, plan[key]) for key in self.PLAN_TENSORS if key != "kv_last_page_len")
        if plan["page_size"] > 1:
            kwargs["kv_last_page_len"] = plan["kv_last_page_len"]
        kwargs["sm_scale"] = pick_sm_scale_gqa(plan["head_dim"], given_scale(plan, bound))
        return kwargs


class GQAPagedDecodeAdapter(PagedGQAAdapter):
    """Targets and wrappers for ``flashinfer.BatchDecodeWithPagedKVCacheWrapper``."""

    WRAPPER_CLASS = "flashinfer.BatchDecodeWithPagedKVCacheWrapper"
    NAME = "gqa_paged_decode"
    HEAD_DIM_ARG = "head_dim"
    PLAN_TENSORS = {
        "kv_indptr": "indptr",
        "kv_indices": "indices",
        "kv_last_page_len": "last_page_len",
    }
