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
        *,
        dps: bool,
        definition: Any,
        solution: Any,
        meta: dict[str, Any] | None = None,
        cleanup: Callable[[], None] | None = None,
    ) -> None:
        self.fn: Callable[..., Any] | None = fn
        self.dps = dps
        self.definition = definition
        self.solution = solution
        self.meta: dict[str, Any] = dict(meta or {})
        self._cleanup = cleanup
        self._n_outputs = len(definition.outputs)

    @property
    def closed(self) -> bool:
        return self.fn is None

    def __call__(self, *args: Any) -> Any:
        """Raw positional call of the entry function (no normalisation)."""
        fn = self.fn
        if fn is None:
            raise RuntimeError(f"solution {self.solution.name!r} was closed; build it again")
        return fn(*args)

    def run(self, inputs: Sequence[Any], outputs: Sequence[Any] | None = None) -> tuple:
        """Call in the definition's order and return the outputs as a tuple.

        DPS: ``fn(*inputs, *outputs)`` and ``tuple(outputs)``. Value-returning: ``fn(*inputs)``;
        a single tensor becomes a 1-tuple; ``outputs`` is ignored.
        """
        fn = self.fn
        if fn is None:
            raise RuntimeError(f"solution {self.solution.name!r} was closed; build it again")
        if self.dps:
            if outputs is None:
                raise ValueError("a destination-passing-style solution needs its outputs")
            fn(*inputs, *outputs)
            return tuple(outputs)
        return self._normalise(fn(*inputs))

    def _normalise(self, result: Any) -> tuple:
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
                f"{self.solution.name}: returned {got}, expected {self._n_outputs} ({names}); "
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
        return f"Runnable({self.solution.name!r}, dps={self.dps}, {state})"


def _as_torch(value: Any) -> Any:
    """tvm-ffi returns its own Tensor objects; the engine compares torch tensors."""
    if type(value).__module__.startswith("tvm_ffi") and hasattr(value, "__dlpack__"):
        import torch

        return torch.from_dlpack(value)
    return value
