"""Lazy attributes of a package: a name is imported from its module on first access.

Packages re-export names whose modules pull in torch or the compilers; binding them at import
time would make ``import fib_core`` (and every script that only reads data) pay for that.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(
    package: str, modules: Mapping[str, str], keep: dict[str, Any] | None = None
) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package``: ``modules`` maps each lazy name to the
    dotted module defining it. With ``keep`` (the package's ``globals()``) a loaded name is
    stored there, so later lookups skip the hook.

    >>> __getattr__ = lazy_attributes("pkg", {"sqrt": "math"})
    >>> __getattr__("sqrt")(4.0)
    2.0
    """

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        if keep is not None:
            keep[name] = value
        return value

    return __getattr__
