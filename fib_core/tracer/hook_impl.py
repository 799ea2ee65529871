"""The apply hook a tracer installs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def make_tracing_hook(tracer: Any) -> Callable[[str, Mapping[str, Any]], None]:
    """A hook for ``set_apply_hook`` that records every applied call into ``tracer``.

    >>> from fib_core.apply import set_apply_hook
    >>> set_apply_hook(make_tracing_hook(tracer))  # doctest: +SKIP
    """

    def tracing_hook(def_name: str, runtime_kwargs: Mapping[str, Any]) -> None:
        tracer.collect(def_name, runtime_kwargs)

    tracing_hook.tracer = tracer  # type: ignore[attr-defined]
    return tracing_hook
