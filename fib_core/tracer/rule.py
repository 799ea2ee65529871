"""TracingRule, where the organizers' layout has it (defined in :mod:`fib_core.tracer.types`)."""

from __future__ import annotations

from .types import TracingRule

__all__ = ["TracingRule"]
