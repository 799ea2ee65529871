"""Tracing rule of DSA sparse attention: keep the selected indices, dedup by axes.

``sparse_indices`` (the top-k pages each token attends to, padded with -1) shapes the work;
the other inputs are regenerated.
"""

from fib_core.tracing_rules import DEDUP_BY_AXES, TracingRule

RULE = TracingRule(tensors_to_dump=["sparse_indices"], dedup_policy=DEDUP_BY_AXES)
