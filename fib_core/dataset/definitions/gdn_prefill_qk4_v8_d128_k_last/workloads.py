"""GDN prefill's workloads: (total_seq_len, num_seqs, len_cu_seqlens) of the real ones, in order.

Facts about the public contest dataset. The sequence boundaries (``cu_seqlens``) are a blob per
workload, lengths of varied size that add up to ``total_seq_len``.
"""

from __future__ import annotations

from typing import Any

COLUMNS = ("total_seq_len", "num_seqs", "len_cu_seqlens")
# fmt: off
ROWS = [
        (6,1,2), (134,1,2), (134,1,2), (8192,32,33), (8192,34,35), (8192,34,35),
        (4124,15,16), (8192,32,33), (8192,25,26), (8192,48,49), (8192,38,39), (8192,38,39),
        (8192,20,21), (8192,56,57), (8192,37,38), (8192,35,36), (8192,43,44), (8192,43,44),
        (8192,57,58), (8192,39,40), (3999,13,14), (32,2,3), (16,1,2), (16,1,2), (40,2,3),
        (49,1,2), (1377,1,2), (3271,2,3), (983,2,3), (983,2,3), (46,2,3), (202,3,4),
        (239,3,4), (294,3,4), (91,2,3), (91,2,3), (132,2,3), (341,2,3), (2107,1,2),
        (1592,3,4), (139,3,4), (139,3,4), (116,1,2), (185,2,3), (81,2,3), (82,3,4),
        (1800,3,4), (1800,3,4), (35,2,3), (3028,5,6), (61,1,2), (16,1,2), (35,1,2),
        (35,1,2), (461,2,3), (832,4,5), (2857,3,4), (30,1,2), (114,2,3), (114,2,3),
        (35,2,3), (31,1,2), (255,3,4), (24,1,2), (97,1,2), (97,1,2), (574,2,3), (92,1,2),
        (85,2,3), (79,1,2), (30,1,2), (30,1,2), (401,4,5), (12,1,2), (18,1,2), (1796,3,4),
        (973,3,4), (973,3,4), (248,2,3), (2040,2,3), (48,1,2), (118,2,3), (76,2,3),
        (76,2,3), (67,1,2), (68,1,2), (13,1,2), (525,1,2), (49,1,2), (49,1,2), (5709,2,3),
        (14,1,2), (661,3,4), (76,2,3), (959,4,5), (959,4,5), (28,2,3), (42,2,3), (2284,3,4),
        (23,1,2)
]
# fmt: on

BLOB_INPUTS = ("cu_seqlens",)


def scalars(row: dict[str, int]) -> dict[str, float]:
    """scale = 1/sqrt(128) (assumed: the real workloads' scale is not public)."""
    # Imported here: fib_core.dataset.generators loads torch (~3 s); this module's import does not.
    from fib_core.dataset.generators import GDN_SCALE

    return {"scale": GDN_SCALE}


def blobs(axes: dict[str, int], gen: Any) -> dict[str, Any]:
    """Sequence boundaries of varied lengths that add up to total_seq_len."""
    # Imported here: fib_core.dataset.generators loads torch (~3 s); this module's import does not.
    from fib_core.dataset.generators import gdn_cu_seqlens

    return {"cu_seqlens": gdn_cu_seqlens(axes["total_seq_len"], axes["num_seqs"], gen)}
