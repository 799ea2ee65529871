"""Binding a call's positional and keyword arguments to parameter names, cheaply.

``inspect.Signature.bind`` costs several microseconds; a routed call must add less than ten in
all, so the common shapes of a call (positional then keyword arguments, defaults filled in)
are bound by a precomputed plan and only unusual ones (``*args``, ``**kwargs``, keyword-only
parameters, a wrong call) go through ``inspect``, which also raises the usual TypeError.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


class ArgBinder:
    """Binds ``(args, kwargs)`` of one callable to a ``{name: value}`` dict with defaults.

    >>> def f(q, k, scale=1.0): ...
    >>> ArgBinder(f).bind((1, 2), {}) == {'q': 1, 'k': 2, 'scale': 1.0}
    True
    """

    _cache: dict[Any, ArgBinder] = {}

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.signature = inspect.signature(fn)
        params = list(self.signature.parameters.values())
        simple = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
        self._fast = simple and not any(p.kind is p.POSITIONAL_ONLY for p in params)
        self._names = tuple(p.name for p in params)
        self._defaults = {p.name: p.default for p in params if p.default is not p.empty}
        self._required = frozenset(p.name for p in params if p.default is p.empty)

    @classmethod
    def from_callable(cls, fn: Callable[..., Any]) -> ArgBinder:
        """A binder per callable, cached (signatures are read once)."""
        binder = cls._cache.get(fn)
        if binder is None:
            binder = cls._cache[fn] = cls(fn)
        return binder

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def bind(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self._fast and len(args) <= len(self._names):
            bound = dict(self._defaults)
            bound.update(zip(self._names, args, strict=False))
            if kwargs:
                for name in kwargs:
                    if name not in self._defaults and name not in self._required:
                        return self._slow(args, kwargs)
                if any(n in kwargs for n in self._names[: len(args)]):
                    return self._slow(args, kwargs)  # given twice: let inspect say so
                bound.update(kwargs)
            if len(bound) == len(self._names):
                return bound
        return self._slow(args, kwargs)

    def _slow(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        ba = self.signature.bind(*args, **kwargs)
        ba.apply_defaults()
        out: dict[str, Any] = {}
        for name, value in ba.arguments.items():
            param = self.signature.parameters[name]
            if param.kind is param.VAR_KEYWORD:
                out.update(value)
            elif param.kind is not param.VAR_POSITIONAL:
                out[name] = value
        return out
