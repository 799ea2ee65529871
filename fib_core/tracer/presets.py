"""The organizers' module path of the tracing policies (``fib_core.tracer.presets``): the
policies defined in :mod:`fib_core.tracer.rules`, plus ``dump_int32()``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .rules import (
    DUMP_INT32,
    policy_dedup_by_avg_seq_len,
    policy_dedup_by_axes,
    policy_keep_first_k,
    policy_keep_random_k,
)

__all__ = [
    "dump_int32",
    "policy_dedup_by_avg_seq_len",
    "policy_dedup_by_axes",
    "policy_keep_first_k",
    "policy_keep_random_k",
]


def dump_int32() -> Callable[[Mapping[str, Any]], list[str]]:
    """The tensor-selection rule that keeps the int32 tensors of a call (``rules.DUMP_INT32``)."""
    return DUMP_INT32
