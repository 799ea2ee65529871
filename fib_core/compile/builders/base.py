"""The builder interface and the registry that picks a builder from a solution's spec.

Builders dispatch on declared fields (``spec.language``, ``spec.binding``), never on names,
and the first registered builder that accepts a spec wins; a new back end is one class plus one
``register_builder`` call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from fib_core.errors import BuildError

from ..options import BuildOptions


@dataclass
class Built:
    """What a builder hands back: the entry function and how to release it.

    ``params``: the parameter list when the builder learnt it in a way Python's ``inspect``
    cannot (compiled functions); None lets the signature check inspect ``fn`` itself.
    """

    fn: Callable[..., Any]
    meta: dict[str, Any] = field(default_factory=dict)
    cleanup: Callable[[], None] | None = None
    params: list[str] | None = None


class Builder(Protocol):
    name: str

    def can_build(self, solution: Any) -> bool: ...

    def build(self, solution: Any, definition: Any, options: BuildOptions) -> Built: ...


_REGISTRY: list[Builder] = []


def register_builder(builder: Builder, *, first: bool = False) -> Builder:
    """Add a builder; ``first`` puts it ahead of the built-in ones (to override them)."""
    if first:
        _REGISTRY.insert(0, builder)
    else:
        _REGISTRY.append(builder)
    return builder


def registered_builders() -> list[Builder]:
    return list(_REGISTRY)


def find_builder(solution: Any) -> Builder:
    for builder in _REGISTRY:
        if builder.can_build(solution):
            return builder
    spec = solution.spec
    language = getattr(spec.language, "value", spec.language)
    raise BuildError(
        f"{solution.name}: no builder for language = '{language}' with binding = "
        f"'{spec.binding}'; the kit builds python, triton, and cuda/cpp with binding "
        "tvm-ffi or torch (set language/binding under [build] in config.toml)"
    )


def language_of(solution: Any) -> str:
    return str(getattr(solution.spec.language, "value", solution.spec.language))


def options_key(fields: dict[str, Any]) -> str:
    """Short stable digest of the build settings that change the binary."""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def entry_parts(solution: Any) -> tuple[str, str]:
    """``(file, function)`` of the spec's ``file::function`` entry point."""
    spec = solution.spec
    return spec.entry_file, spec.entry_function


def write_sources(solution: Any, root: Any) -> None:
    """Write every source file under ``root`` at its relative path."""
    for src in solution.sources:
        path = root / src.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(src.content, encoding="utf-8")
