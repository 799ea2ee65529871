"""TracingRule under the organizers' module path ``tracer.rule`` (defined in
:mod:`fib_core.tracing_rules`)."""

from __future__ import annotations

from fib_core.tracing_rules import TracingRule

__all__ = ["TracingRule"]
