"""Structured inputs: a packed FP8 key cache with real scales, lengths and a matching table."""

from __future__ import annotations

from typing import Any

from fib_core.dataset.generators import indexer_packed_key_cache, indexer_seq_lens_block_table


def generate(definition: Any, axes: dict[str, int], gen: Any, device: Any) -> dict[str, Any]:
    """The key cache (random bytes would decode to NaN scales), seq_lens and block_table."""
    seq_lens, table = indexer_seq_lens_block_table(
        axes["batch_size"], axes["max_num_pages"], axes["num_pages"], gen, device
    )
    cache = indexer_packed_key_cache(axes["num_pages"], gen, device)
    return {"k_index_cache_fp8": cache, "seq_lens": seq_lens, "block_table": table}
