"""GDN decode's workloads: the batch sizes of the contest's real ones, in order (repeats are real).

No blobs: every tensor input is generated at run time (see ``generator.py``); ``scale`` is a
scalar input.
"""

from __future__ import annotations

COLUMNS = ("batch_size",)
# fmt: off
ROWS = [
        (1,), (1,), (1,), (1,), (1,), (1,), (1,), (1,), (1,), (1,), (4,), (4,), (4,), (4,),
        (4,), (4,), (4,), (4,), (8,), (8,), (8,), (8,), (8,), (8,), (8,), (16,), (16,),
        (16,), (16,), (16,), (16,), (16,), (32,), (32,), (32,), (32,), (32,), (32,), (32,),
        (48,), (48,), (48,), (48,), (48,), (48,), (48,), (64,), (64,), (64,), (64,), (64,),
        (64,), (64,), (64,)
]
# fmt: on


def scalars(row: dict[str, int]) -> dict[str, float]:
    """scale = 1/sqrt(128) (assumed: the real workloads' scale is not public)."""
    # Imported here: fib_core.dataset.generators loads torch (~3 s); this module's import does not.
    from fib_core.dataset.generators import GDN_SCALE

    return {"scale": GDN_SCALE}
