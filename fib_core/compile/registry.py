"""``get_registry()``: the organizers' registry of builder classes, over the kit's build().

``get_registry().build(definition, solution)`` picks the first builder whose ``can_build``
accepts the solution; ``build_reference(definition)`` makes a Runnable of the definition's own
reference ``run`` (the same loader the benchmark engine uses), callable by keyword:

    >>> ref = get_registry().build_reference(definition)   # doctest: +SKIP
    >>> expected = ref(**inputs)                            # doctest: +SKIP
"""

from __future__ import annotations

import threading
from typing import Any

from fib_core.errors import BuildError

from .builder import Builder
from .runnable import Runnable


class BuilderRegistry:
    """An ordered tuple of builders; the first that accepts a solution builds it."""

    def __init__(self, builders: tuple[Builder, ...]) -> None:
        self.builders = tuple(builders)

    def clear(self) -> None:
        """Close every Runnable the builders made."""
        for builder in self.builders:
            builder.clear_cache()

    def build(self, defn: Any, sol: Any) -> Runnable:
        """Build ``sol`` for ``defn`` with the first builder that can; BuildError if none can."""
        # Imported here: fib_core.data loads pydantic (~50 ms); this module's import does not.
        from fib_core.data import Definition, Solution

        if not isinstance(defn, Definition) or not isinstance(sol, Solution):
            raise TypeError(
                f"build(definition, solution): got a {type(defn).__name__} and a "
                f"{type(sol).__name__}; pass a Definition then a Solution (e.g. "
                "ts.definitions[name], ts.get_solution(solution_name))"
            )
        for builder in self.builders:
            if builder.can_build(sol):
                return builder.build(defn, sol)
        language = getattr(sol.spec.language, "value", sol.spec.language)
        raise BuildError(
            f"{sol.name}: no builder for language {language!r}; the kit builds python, triton, "
            "cuda and cpp solutions"
        )

    def build_reference(self, defn: Any) -> Runnable:
        """The definition's reference ``run`` as a value-returning Runnable."""
        # Imported here for start-up time: the dataset's registry (about 10 ms) is not needed
        # by the processes that import this module to build solutions.
        from fib_core.dataset.references import reference_run

        fn = reference_run(defn)
        return Runnable(fn, dps=False, definition=defn, meta={"builder": "reference"})


_REGISTRY: BuilderRegistry | None = None
_LOCK = threading.Lock()


def get_registry() -> BuilderRegistry:
    """The process-wide registry: Python, Triton, then CUDA/C++ builders."""
    global _REGISTRY
    with _LOCK:
        if _REGISTRY is None:
            # Imported here: each builder module loads this module at import (cycle).
            from .builders.cuda_builder import CUDABuilder
            from .builders.python_builder import PythonBuilder
            from .builders.triton_builder import TritonBuilder  # (the same cycle)

            python = PythonBuilder()
            _REGISTRY = BuilderRegistry((python, TritonBuilder(python), CUDABuilder()))
        return _REGISTRY
