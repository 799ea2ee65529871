"""The contest's tracks and the definitions each one holds.

A track is what a contestant signs up for; a definition is what the kit benchmarks. People
often type the former where the latter belongs, so config validation uses this table to say
which definition names they meant.
"""

from __future__ import annotations

TRACKS: dict[str, tuple[str, ...]] = {
    "fused_moe": ("moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048",),
    "sparse_attention": (
        "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
        "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64",
    ),
    "gated_delta_net": (
        "gdn_decode_qk4_v8_d128_k_last",
        "gdn_prefill_qk4_v8_d128_k_last",
    ),
}

# Spellings people use for the same track (the contest site, op_type names, shorthand).
TRACK_ALIASES: dict[str, str] = {
    "moe": "fused_moe",
    "fused-moe": "fused_moe",
    "dsa": "sparse_attention",
    "dsa_paged": "sparse_attention",
    "sparse-attention": "sparse_attention",
    "gdn": "gated_delta_net",
    "gated-delta-net": "gated_delta_net",
}

DEFAULT_DEFINITION = "gdn_decode_qk4_v8_d128_k_last"


def track_of(name: str) -> str | None:
    """The canonical track name if ``name`` names a track (or an alias of one), else None.

    >>> track_of("gdn")
    'gated_delta_net'
    >>> track_of("gdn_decode_qk4_v8_d128_k_last") is None
    True
    """
    key = name.strip().lower()
    if key in TRACKS:
        return key
    return TRACK_ALIASES.get(key)
