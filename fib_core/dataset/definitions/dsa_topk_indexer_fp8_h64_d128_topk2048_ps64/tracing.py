"""Tracing rule of the DSA top-k indexer: keep the lengths and the page table, dedup by axes.

``seq_lens`` and ``block_table`` decide which cache pages are read; the embedded dataset stores
them as blobs, and so does a traced workload.
"""

from fib_core.tracing_rules import DEDUP_BY_AXES, TracingRule

RULE = TracingRule(tensors_to_dump=["seq_lens", "block_table"], dedup_policy=DEDUP_BY_AXES)
