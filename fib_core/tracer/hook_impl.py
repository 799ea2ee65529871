"""``make_tracing_hook(tracer)``: the organizers' bridge from the apply hook to a Tracer.

    >>> from fib_core.apply.hook import set_apply_hook
    >>> set_apply_hook(make_tracing_hook(get_tracer()))   # doctest: +SKIP

Every call of an ``@apply`` function then reaches ``tracer.collect(def_name, runtime_kwargs)``
(what :func:`fib_core.tracer.enable_tracing` arranges by itself).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def make_tracing_hook(tracer: Any) -> Callable[[str, Mapping[str, Any]], None]:
    """An apply hook that records each call with ``tracer.collect``."""

    def hook(def_name: str, runtime_kwargs: Mapping[str, Any]) -> None:
        tracer.collect(def_name, runtime_kwargs)

    return hook
