"""Structured inputs: sparse indices that point at distinct tokens of each token's context."""

from __future__ import annotations

from typing import Any

from fib_core.dataset.generators import dsa_sparse_indices


def generate(definition: Any, axes: dict[str, int], gen: Any, device: Any) -> dict[str, Any]:
    """``sparse_indices`` [num_tokens, topk], -1 padded; the rest of the inputs stay random."""
    return {
        "sparse_indices": dsa_sparse_indices(axes["num_tokens"], axes["num_pages"], gen, device)
    }
