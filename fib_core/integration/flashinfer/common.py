"""Shared pieces of the FlashInfer adapters: routing a call with the original as fallback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fib_core.apply import apply

_FELL_BACK = object()


def route_or_call(
    def_name: str,
    runtime_kwargs: dict[str, Any],
    original: Callable[..., Any],
    args: tuple,
    kwargs: dict[str, Any],
) -> tuple[bool, Any]:
    """Function-mode apply with the original call as fallback: (routed?, result)."""
    held: dict[str, Any] = {}

    def fallback(**_: Any) -> Any:
        held["result"] = original(*args, **kwargs)
        return _FELL_BACK

    result = apply(def_name, runtime_kwargs=runtime_kwargs, fallback=fallback)
    if result is _FELL_BACK:
        return False, held["result"]
    return True, result


def shape_of(value: Any) -> tuple[int, ...] | None:
    shape = getattr(value, "shape", None)
    return None if shape is None else tuple(shape)
