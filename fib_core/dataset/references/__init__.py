"""Our reference implementations, looked up by definition name.

Each definition folder's ``reference.py`` (see :mod:`fib_core.dataset.registry`) imports only
torch and math and defines a global ``run`` taking the definition's inputs in order and
returning its outputs (a tuple when there are several). The file's text becomes the
``reference`` field of the materialised definition, so it is loaded the same way a harness
does: by executing the source, not by importing a module.

:func:`reference_run` takes any Definition instead, as loaded from a dataset (a user's own
too), and keeps its ``run`` once per content: the engine, the judge and the compile registry's
``build_reference`` all call the reference through it.

Example::

    from fib_core.dataset.references import load_reference
    run = load_reference("gdn_decode_qk4_v8_d128_k_last")["run"]
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fib_core.dataset import registry
from fib_core.errors import FibError

if TYPE_CHECKING:
    from fib_core.data.definition import Definition

_LOADED: dict[str, Callable[..., Any]] = {}


def _entry(definition_name: str) -> registry.DefinitionEntry:
    entry = registry.get(definition_name)
    if entry is None:
        raise KeyError(f"no reference for definition {definition_name!r}: no definition folder")
    return entry


def reference_path(definition_name: str) -> Path:
    """The reference file of a definition (KeyError when there is none)."""
    path = _entry(definition_name).reference_path
    if path is None:
        raise KeyError(f"no reference.py for definition {definition_name!r}")
    return path


def reference_source(definition_name: str) -> str:
    """The reference's source text, as stored in the definition's ``reference`` field."""
    return _entry(definition_name).reference_source()


def load_reference(definition_name: str) -> dict[str, Any]:
    """Execute the reference's source alone and return its namespace (``ns["run"]`` is it)."""
    return _entry(definition_name).load_reference()


class ReferenceFailure(FibError):
    """The definition's reference cannot be loaded or returned something unusable."""


def reference_run(definition: Definition) -> Callable[..., Any]:
    """The ``run`` function of a Definition's ``reference`` text, executed once per content.

    (:func:`load_reference` is the by-name lookup of a registered definition folder's whole
    reference namespace; this one takes any Definition, as loaded from a dataset.)
    """
    key = definition.content_hash()
    fn = _LOADED.get(key)
    if fn is None:
        try:
            namespace = registry.exec_reference(
                definition.reference, definition.name, f"<reference of {definition.name}>"
            )
        except Exception as err:
            raise ReferenceFailure(
                f"definition {definition.name!r}: its reference fails to load: "
                f"{type(err).__name__}: {err}"
            ) from None
        fn = namespace.get("run")
        if not callable(fn):
            raise ReferenceFailure(f"definition {definition.name!r}: reference defines no run()")
        _LOADED[key] = fn
    return fn
