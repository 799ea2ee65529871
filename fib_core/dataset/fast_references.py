"""The GDN prefill fast reference under its old import path.

Fast references live in their definition folders (``fast_reference.py``); this module forwards
the names code imported from here.
"""

from __future__ import annotations

from typing import Any

GDN_PREFILL = "gdn_prefill_qk4_v8_d128_k_last"


_FORWARDED = ("gdn_prefill_batched", "gdn_prefill_recurrent")


def __getattr__(name: str) -> Any:
    if name in _FORWARDED:
        from fib_core.dataset import registry

        return getattr(registry.get(GDN_PREFILL).module("fast_reference"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
