"""The DSA top-k indexer's checker under its old import path.

Checkers live in their definition folders (``checker.py``, found through
:mod:`fib_core.dataset.registry`); this module only forwards the names code imported from here.
"""

from __future__ import annotations

from typing import Any

DSA_INDEXER = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"


def __getattr__(name: str) -> Any:
    from fib_core.dataset import registry

    entry = registry.get(DSA_INDEXER)
    module = entry.module("checker") if entry is not None else None
    if module is None or not hasattr(module, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(module, name)
