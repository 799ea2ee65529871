"""The organizers' module path of the tracing records (``fib_core.tracer.types``)."""

from __future__ import annotations

from .entry import TraceEntry
from .rules import TracingRule

__all__ = ["TraceEntry", "TracingRule"]
