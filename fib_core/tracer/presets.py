"""The kit's default rule set (:func:`full_preset`: each definition folder's own rule), and the
policies and dump choices under the organizers' module path ``tracer.presets``.

The policies, dump choices and generic rules are defined in :mod:`fib_core.tracing_rules`;
each definition's own rule lives in its definition folder (``tracing.py``, ``RULE``).
"""

from __future__ import annotations

from fib_core.dataset import registry
from fib_core.tracing_rules import (
    DEDUP_BY_AVG_SEQ_LEN,
    DEDUP_BY_AXES,
    DUMP_ALL,
    DUMP_INT32,
    DUMP_NONE,
    KEEP_ALL,
    KEEP_RANDOM_ONE,
    TracingRule,
    all_dump_rule,
    average_seq_len,
    axes_only_rule,
    dump_int32,
    policy_dedup_by_avg_seq_len,
    policy_dedup_by_axes,
    policy_keep_first_k,
    policy_keep_random_k,
)

__all__ = [
    "DEDUP_BY_AVG_SEQ_LEN",
    "DEDUP_BY_AXES",
    "DUMP_ALL",
    "DUMP_INT32",
    "DUMP_NONE",
    "KEEP_ALL",
    "KEEP_RANDOM_ONE",
    "all_dump_rule",
    "average_seq_len",
    "axes_only_rule",
    "dump_int32",
    "full_preset",
    "policy_dedup_by_avg_seq_len",
    "policy_dedup_by_axes",
    "policy_keep_first_k",
    "policy_keep_random_k",
]


def full_preset() -> dict[str, TracingRule]:
    """The default rules: each registered definition's own, from the ``tracing.py`` of its
    definition folder (see :mod:`fib_core.dataset.registry`); definitions without one fall back
    to :data:`~fib_core.tracing_rules.axes_only_rule`.

    >>> sorted(full_preset())[0]
    'dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64'
    """
    rules = {entry.name: entry.tracing_rule for entry in registry.entries()}
    return {name: rule for name, rule in rules.items() if rule is not None}
