"""Tracing rule of the fp8 MoE: keep the routing inputs, dedup by axes.

``routing_logits`` and ``routing_bias`` decide how tokens spread over the experts, which sets
the work per expert; the activations and weights are regenerated.
"""

from fib_core.tracing_rules import DEDUP_BY_AXES, TracingRule

RULE = TracingRule(tensors_to_dump=["routing_logits", "routing_bias"], dedup_policy=DEDUP_BY_AXES)
