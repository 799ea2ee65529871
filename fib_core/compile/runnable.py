"""Runnable: one calling convention for every built solution.

The benchmark engine calls ``run(inputs, outputs)`` and always gets a tuple of output tensors
back, whichever style the solution uses: DPS functions write into the preallocated outputs we
pass; value-returning functions return one tensor or a tuple, which we normalise. ``close()``
drops the loaded module and deletes private build folders; cached builds stay for next time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fib_core.errors import SignatureError


class Runnable:
    """A built solution: ``fn`` is the raw entry function, ``meta`` says how it was built."""

    def __init__(
        self,
        fn: Callable[..., Any],
        closer: Callable[[], None] | None = None,
        meta: dict[str, Any] | None = None,
        *,
        dps: bool = False,
        definition: Any = None,
        solution: Any = None,
        cleanup: Callable[[], None] | None = None,
    ) -> None:
        """``Runnable(fn, dps=..., definition=..., solution=..., cleanup=...)`` (the kit's
        builders) or ``Runnable(fn, closer, meta)`` (the organizers' form: a plain callable
        called with keyword arguments; ``closer`` is the same thing as ``cleanup``)."""
        if closer is not None and cleanup is not None:
            raise TypeError("Runnable: pass closer or cleanup, not both")
        self.fn: Callable[..., Any] | None = fn
        self.dps = dps
        self.definition = definition
        self.solution = solution
        self.meta: dict[str, Any] = dict(meta or {})
        self._cleanup = cleanup if cleanup is not None else closer
        self._n_outputs = len(definition.outputs) if definition is not None else None

    @property
    def closed(self) -> bool:
        return self.fn is None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Positional: the raw call of the entry function (no normalisation).

        Keyword (the organizers' calling convention, ``runnable(q=q, k=k, ...)``): the inputs by
        name; optional inputs may be left out (None). The outputs come back as one tensor, or a
        tuple when the definition has several, whatever the solution's style: for a
        destination-passing-style solution they are allocated here from the definition's
        shapes (var axes read off the inputs) and dtypes. Without a definition (a Runnable made
        from a plain callable) the keywords go to ``fn`` unchanged.
        """
        fn = self.fn
        if fn is None:
            raise RuntimeError(f"{self._label()} was closed; build it again")
        if not kwargs or self.definition is None:
            return fn(*args, **kwargs)
        if args:
            raise TypeError(f"{self._label()}: pass the inputs all by name or all by position")
        # Imported here: fib_core.compile.call_kwargs loads this module at import (cycle).
        from .call_kwargs import allocate_outputs, inputs_in_order

        inputs = inputs_in_order(self.definition, kwargs, self._label())
        outputs = allocate_outputs(self.definition, inputs) if self.dps else None
        result = self.run(inputs, outputs)
        return result[0] if len(result) == 1 else result

    def _label(self) -> str:
        return f"solution {self.solution.name!r}" if self.solution is not None else "runnable"

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any] | None = None) -> tuple:
        """Call in the definition's order and return the outputs as a tuple.

        DPS: ``fn(*inputs, *outputs)`` and ``tuple(outputs)``. Value-returning: ``fn(*inputs)``;
        a single tensor becomes a 1-tuple; ``outputs`` is ignored.
        """
        fn = self.fn
        if fn is None:
            raise RuntimeError(f"{self._label()} was closed; build it again")
        try:
            if self.dps:
                if outputs is None:
                    raise ValueError("a destination-passing-style solution needs its outputs")
                fn(*inputs, *outputs)
                return tuple(outputs)
            result = fn(*inputs)
        except Exception as err:  # the contestant's line and Python's hint, as a note
            from .solution_errors import note_solution_error

            note_solution_error(err)
            raise
        return self._normalise(result)

    def _normalise(self, result: Any) -> tuple:
        if self.definition is None:
            return tuple(result) if isinstance(result, (tuple, list)) else (result,)
        if isinstance(result, (tuple, list)):
            values = tuple(_as_torch(r) for r in result)
        elif result is None:
            values = ()
        else:
            values = (_as_torch(result),)
        if len(values) != self._n_outputs:
            names = ", ".join(self.definition.outputs)
            got = "None" if result is None else f"{len(values)} value(s)"
            raise SignatureError(
                f"{getattr(self.solution, 'name', 'the function')}: returned {got}, expected {self._n_outputs} ({names}); "
                "if your function writes into preallocated outputs, set "
                "`destination_passing_style = true` under [build] in config.toml"
            )
        return values

    def close(self) -> None:
        """Release the function and module; delete private build files. Safe to call twice."""
        self.fn = None
        cleanup, self._cleanup = self._cleanup, None
        if cleanup is not None:
            cleanup()

    def __enter__(self) -> Runnable:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.meta.get("builder", "?")
        name = self.solution.name if self.solution is not None else getattr(self.fn, "__name__", "?")
        return f"Runnable({name!r}, dps={self.dps}, {state})"


def _as_torch(value: Any) -> Any:
    """tvm-ffi returns its own Tensor objects; the engine compares torch tensors."""
    if type(value).__module__.startswith("tvm_ffi") and hasattr(value, "__dlpack__"):
        # Imported here: torch takes ~3 s to load, and importing this module does not need it.
        import torch

        return torch.from_dlpack(value)
    return value
