"""Structured inputs: a packed FP8 key cache with real scales, lengths and a matching table."""

from __future__ import annotations

from typing import Any

from fib_core.dataset.generators import indexer_packed_key_cache, indexer_seq_lens_block_table


def generate(
    definition: Any, axes: dict[str, int], gen: Any, device: Any, wanted: Any = None
) -> dict[str, Any]:
    """The key cache (random bytes would decode to NaN scales), seq_lens and block_table.

    The contest's workloads give seq_lens and block_table as blobs: then only the cache is
    made (the table's draws and host round trips cost about as much as the cache itself).
    """
    out: dict[str, Any] = {}
    if wanted is None or {"seq_lens", "block_table"} & set(wanted):
        out["seq_lens"], out["block_table"] = indexer_seq_lens_block_table(
            axes["batch_size"], axes["max_num_pages"], axes["num_pages"], gen, device
        )
    out["k_index_cache_fp8"] = indexer_packed_key_cache(axes["num_pages"], gen, device)
    return out
