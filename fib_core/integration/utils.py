"""Helpers of adapters: ArgBinder (arguments to names) and ContextStore (per-instance state).

ContextStore holds the state an adapter keeps between a wrapper's plan and run calls.

FlashInfer-style wrappers take the shapes in ``plan(...)`` and the tensors in ``run(...)``; an
adapter needs what ``plan`` saw when ``run`` comes. State is held per instance, weakly, so a
discarded wrapper object frees it.
"""

from __future__ import annotations

import weakref
from typing import Any

from fib_core.apply.binding import ArgBinder

__all__ = ["ArgBinder", "ContextStore"]


class ContextStore:
    """A dict of state per object.

    >>> store = ContextStore()
    >>> class W: ...
    >>> w = W()
    >>> store.get(w)["seq_lens"] = [3, 5]
    >>> store.get(w)
    {'seq_lens': [3, 5]}
    """

    def __init__(self) -> None:
        self._weak: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
        self._by_id: dict[int, tuple[Any, dict[str, Any]]] = {}

    def get(self, inst: Any) -> dict[str, Any]:
        """The instance's state dict (created empty on first use)."""
        try:
            state = self._weak.get(inst)
            if state is None:
                state = self._weak[inst] = {}
            return state
        except TypeError:  # not weak-referenceable (e.g. __slots__ without __weakref__)
            held = self._by_id.get(id(inst))
            if held is None or held[0] is not inst:
                held = self._by_id[id(inst)] = (inst, {})
            return held[1]

    def pop(self, inst: Any) -> dict[str, Any] | None:
        """Forget the inst's state; returns it (None if there was none)."""
        try:
            return self._weak.pop(inst, None)
        except TypeError:
            held = self._by_id.pop(id(inst), None)
            return None if held is None else held[1]

    def clear(self) -> None:
        self._weak.clear()
        self._by_id.clear()
