"""Structured inputs: as GDN decode, plus sequence boundaries that add up to the token count."""

from __future__ import annotations

from typing import Any

from fib_core.dataset.generators import gdn_common_inputs, gdn_cu_seqlens


def generate(definition: Any, axes: dict[str, int], gen: Any, device: Any) -> dict[str, Any]:
    """q, k [T, 4, 128], state per sequence, gate parameters and cu_seqlens."""
    total, seqs = axes["total_seq_len"], axes["num_seqs"]
    out = gdn_common_inputs(seqs, gen, device, (total,))
    out["cu_seqlens"] = gdn_cu_seqlens(total, seqs, gen, device)
    return out
