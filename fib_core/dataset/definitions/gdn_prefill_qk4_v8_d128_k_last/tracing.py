"""Tracing rule of GDN prefill: keep the sequence boundaries, one workload per length mix.

``cu_seqlens`` is what random numbers cannot stand in for (the embedded dataset stores it as a
blob too); calls of equal shape but very different average sequence length stay apart.
"""

from fib_core.tracing_rules import DEDUP_BY_AVG_SEQ_LEN, TracingRule

RULE = TracingRule(tensors_to_dump=["cu_seqlens"], dedup_policy=DEDUP_BY_AVG_SEQ_LEN)
