"""The organizers' module path ``fib_core.tracer.rule``: the rule class of :mod:`.rules`."""

from __future__ import annotations

from .rules import TracingRule

__all__ = ["TracingRule"]
