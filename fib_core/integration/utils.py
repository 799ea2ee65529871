"""The organizers' module path ``fib_core.integration.utils``: ``ArgBinder`` (from
:mod:`fib_core.apply.binding`) and ``ContextStore`` (from :mod:`.context`)."""

from __future__ import annotations

from fib_core.apply.binding import ArgBinder

from .context import ContextStore

__all__ = ["ArgBinder", "ContextStore"]
