"""DSA sparse attention's workloads: (num_tokens, num_pages) of the contest's real ones, in order.

Facts about the public contest dataset; repeated shapes are real (same shape, other data). The
selected rows (``sparse_indices``) are a blob per workload; ``sm_scale`` is the real value.
"""

from __future__ import annotations

from typing import Any

COLUMNS = ("num_tokens", "num_pages")
# fmt: off
ROWS = [
        (1,8462), (2,8462), (2,8462), (2,8462), (2,8462), (2,8462), (2,8462), (2,8462),
        (2,8462), (8,8462), (8,8462), (7,8462), (8,8462), (6,8462), (8,8462), (6,8462),
        (8,8462), (7,8462), (8,8462), (8,8462), (8,8462), (6,8462), (7,8462)
]
# fmt: on

BLOB_INPUTS = ("sparse_indices",)


def scalars(row: dict[str, int]) -> dict[str, float]:
    """sm_scale = 1/sqrt(192), the real workloads' value."""
    # Imported here: fib_core.dataset.generators loads torch (~3 s); this module's import does not.
    from fib_core.dataset.generators import DSA_SM_SCALE

    return {"sm_scale": DSA_SM_SCALE}


def blobs(axes: dict[str, int], gen: Any) -> dict[str, Any]:
    """The selected cache rows of each token, stored as a blob like the real dataset's."""
    # Imported here: fib_core.dataset.generators loads torch (~3 s); this module's import does not.
    from fib_core.dataset.generators import dsa_sparse_indices

    return {"sparse_indices": dsa_sparse_indices(axes["num_tokens"], axes["num_pages"], gen)}
