"""The organizers' module path of the apply hook (``fib_core.apply.hook``): the same two
functions as :mod:`fib_core.apply.api`, where the hook lives."""

from __future__ import annotations

from .api import get_apply_hook, set_apply_hook

__all__ = ["get_apply_hook", "set_apply_hook"]
