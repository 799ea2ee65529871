"""The apply hook: one function called with every call of an applied function.

``fn(def_name, runtime_kwargs)`` runs before routing, whether or not a runtime is enabled; the
tracer installs itself here (see ``fib_core.tracer``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

ApplyHook = Callable[[str, Mapping[str, Any]], None]

current: ApplyHook | None = None


def set_apply_hook(fn: ApplyHook | None) -> ApplyHook | None:
    """Install ``fn`` (None removes the hook); returns the previous one.

    >>> seen = []
    >>> _ = set_apply_hook(lambda name, kw: seen.append(name))
    >>> _ = set_apply_hook(None)
    """
    global current
    previous, current = current, fn
    return previous


def get_apply_hook() -> ApplyHook | None:
    """The installed hook, or None."""
    return current
