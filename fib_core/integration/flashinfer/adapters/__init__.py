"""One adapter per FlashInfer entry point family that carries a contest operator."""

from __future__ import annotations

from .gdn_decode import GDNDecodeAdapter
from .moe_fp8 import MoEFP8BlockScaleAdapter

__all__ = ["GDNDecodeAdapter", "MoEFP8BlockScaleAdapter"]
