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

from .gqa_paged_decode import PagedGQAAdapter


class GQAPagedPrefillAdapter(PagedGQAAdapter):
    """Targets and wrappers for ``flashinfer.BatchPrefillWithPagedKVCacheWrapper``."""

    WRAPPER_CLASS = "flashinfer.BatchPrefillWithPagedKVCacheWrapper"
    NAME = "gqa_paged_prefill"
    CAUSAL = True
    PLAN_TENSORS = {
        "qo_indptr": "qo_indptr",
        "kv_indptr": "paged_kv_indptr",
        "kv_indices": "paged_kv_indices",
        "kv_last_page_len": "paged_kv_last_page_len",
    }
