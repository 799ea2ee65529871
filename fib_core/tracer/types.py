"""TraceEntry and TracingRule under the organizers' module path ``tracer.types``.

Both are defined in :mod:`fib_core.tracing_rules`, below the dataset, so that definition
folders can state their rules without importing the tracer.
"""

from __future__ import annotations

from fib_core.tracing_rules import TraceEntry, TracingRule

__all__ = ["TraceEntry", "TracingRule"]
