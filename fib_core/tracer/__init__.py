"""fib_core.tracer: record the workloads a live model produces, as dataset records.

    from fib_core.tracer import enable_tracing, disable_tracing

    enable_tracing(out_dir="my-dataset/traces/workloads")
    model.generate(...)        # every call of an @apply function is recorded
    print(disable_tracing())   # {'gdn_decode_qk4_v8_d128_k_last': {'collected': 64, 'written': 3, ...}}

Names and meaning follow the organizers' ``flashinfer_bench.tracer``. The rules' vocabulary
(``TracingRule``, policies, dump choices) is defined in :mod:`fib_core.tracing_rules`, where
definition folders use it, and re-exported here.
"""

from __future__ import annotations

from fib_core.tracing_rules import (
    DEDUP_BY_AVG_SEQ_LEN,
    DEDUP_BY_AXES,
    DUMP_ALL,
    DUMP_INT32,
    DUMP_NONE,
    KEEP_ALL,
    KEEP_RANDOM_ONE,
    TraceEntry,
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

from .hook_impl import make_tracing_hook
from .presets import full_preset
from .tracer import Tracer, disable_tracing, enable_tracing, get_tracer, kit_definitions

__all__ = [
    "DEDUP_BY_AVG_SEQ_LEN",
    "DEDUP_BY_AXES",
    "DUMP_ALL",
    "DUMP_INT32",
    "DUMP_NONE",
    "KEEP_ALL",
    "KEEP_RANDOM_ONE",
    "TraceEntry",
    "Tracer",
    "TracingRule",
    "all_dump_rule",
    "average_seq_len",
    "axes_only_rule",
    "disable_tracing",
    "dump_int32",
    "enable_tracing",
    "full_preset",
    "get_tracer",
    "kit_definitions",
    "make_tracing_hook",
    "policy_dedup_by_avg_seq_len",
    "policy_dedup_by_axes",
    "policy_keep_first_k",
    "policy_keep_random_k",
]
