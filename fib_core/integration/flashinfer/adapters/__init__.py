"""One adapter per FlashInfer entry point family that carries a contest operator, plus the
attention wrappers (paged/ragged GQA, paged MLA) for models whose attention has a definition."""

from __future__ import annotations

from .gdn_decode import GDNDecodeAdapter
from .gqa_paged_decode import GQAPagedDecodeAdapter
from .gqa_paged_prefill import GQAPagedPrefillAdapter
from .mla_paged import MLAPagedAdapter
from .moe_fp8 import MoEFP8BlockScaleAdapter
from .ragged_prefill import RaggedPrefillAdapter

__all__ = [
    "GDNDecodeAdapter",
    "GQAPagedDecodeAdapter",
    "GQAPagedPrefillAdapter",
    "MLAPagedAdapter",
    "MoEFP8BlockScaleAdapter",
    "RaggedPrefillAdapter",
]
