"""The organizers' builder interface (``fib_core.compile.builder``) over the kit's build().

Code written for flashinfer-bench builds with ``Builder.build(definition, solution) ->
Runnable`` and frees with ``clear_cache()``. Here every such builder hands the work to
:func:`fib_core.compile.build` (the kit's one build path: cache on disk, signature check,
trimmed compiler errors); what a builder adds is the choice of solutions it accepts
(``can_build``) and an in-memory cache of the Runnables it made, keyed by the solution's hash.

    >>> from fib_core.compile import get_registry
    >>> runnable = get_registry().build(definition, solution)  # doctest: +SKIP
    >>> out = runnable(q=q, k=k, v=v)                            # doctest: +SKIP
"""

from __future__ import annotations

import re
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from fib_core.errors import BuildError

from .runnable import Runnable

__all__ = [
    "BuildError",
    "Builder",
    "create_pkg_name",
    "write_sources_to_dir",
    "write_sources_to_temp",
]


def write_sources_to_dir(dir: str, sources: list[Any]) -> None:  # noqa: A002 - organizers' name
    """Write each ``SourceFile`` under ``dir`` at its relative path (paths were validated when
    the SourceFile was made: no absolute paths, no ``..``)."""
    root = Path(dir)
    for src in sources:
        target = root / src.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(src.content, encoding="utf-8")


def write_sources_to_temp(base: str, sources: list[Any], pkg: str | None = None) -> str:
    """Write the sources into a new private folder under ``base`` (inside a package folder
    ``pkg`` with an ``__init__.py`` when given); returns the folder that holds the sources."""
    Path(base).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="fib-src-", dir=base))
    if pkg:
        folder = folder / pkg
        folder.mkdir()
        (folder / "__init__.py").touch()
    write_sources_to_dir(str(folder), sources)
    return str(folder)


def create_pkg_name(sol: Any, prefix: str = "") -> str:
    """A valid, unique-per-content Python package name for a solution."""
    stem = re.sub(r"\W", "_", sol.name).strip("_") or "solution"
    if stem[0].isdigit():
        stem = "s_" + stem
    return f"{prefix}{stem}_{sol.hash()[:12]}"


class Builder(ABC):
    """Builds the solutions it accepts; ``build`` returns the same Runnable for the same
    solution until ``clear_cache`` closes them.

    Subclasses say which solutions they take (``can_build``); the build itself is the kit's
    :func:`fib_core.compile.build` with ``self.options`` (a ``BuildOptions``; None = defaults).
    """

    def __init__(self) -> None:
        self.options: Any = None
        self._runnables: dict[tuple[str, str], Runnable] = {}

    @abstractmethod
    def can_build(self, solution: Any) -> bool:
        """True when this builder accepts ``solution`` (by its spec's language/binding)."""

    def build(self, definition: Any, solution: Any) -> Runnable:
        """A Runnable for ``solution``; raises ``BuildError`` if this builder does not take it."""
        if not self.can_build(solution):
            language = getattr(solution.spec.language, "value", solution.spec.language)
            raise BuildError(
                f"{type(self).__name__} cannot build solution {solution.name!r} "
                f"(language {language!r}); use get_registry().build(definition, solution)"
            )
        key = (solution.hash(), definition.content_hash())
        runnable = self._runnables.get(key)
        if runnable is None or runnable.closed:
            runnable = self._build(definition, solution)
            self._runnables[key] = runnable
        return runnable

    def _build(self, definition: Any, solution: Any) -> Runnable:
        # Imported here: fib_core.compile.build loads this module at import (cycle).
        from .build import build

        return build(solution, definition, self.options)

    def clear_cache(self) -> None:
        """Close every Runnable this builder made (compiled builds stay in the disk cache)."""
        runnables, self._runnables = list(self._runnables.values()), {}
        for runnable in runnables:
            runnable.close()


def language_is(solution: Any, *names: str) -> bool:
    """True when the solution's ``spec.language`` is one of ``names``."""
    return str(getattr(solution.spec.language, "value", solution.spec.language)) in names
