"""Our reference implementations, one self-contained module per contest definition.

Each ``<definition name>.py`` imports only torch and math and defines a global ``run`` taking
the definition's inputs in order and returning its outputs (a tuple when there are several).
The file's text becomes the ``reference`` field of the materialised definition, so it is loaded
here the same way a harness does: by executing the source, not by importing a module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

REFERENCE_DIR = Path(__file__).resolve().parent


def reference_path(definition_name: str) -> Path:
    """The reference file of a definition (KeyError when there is none)."""
    path = REFERENCE_DIR / f"{definition_name}.py"
    if not path.is_file():
        raise KeyError(f"no reference for definition {definition_name!r} in {REFERENCE_DIR}")
    return path


def reference_source(definition_name: str) -> str:
    """The reference's source text, as stored in the definition's ``reference`` field."""
    return reference_path(definition_name).read_text(encoding="utf-8")


def load_reference(definition_name: str) -> dict[str, Any]:
    """Execute the reference's source alone and return its namespace (``ns["run"]`` is it)."""
    namespace: dict[str, Any] = {"__name__": f"fib_reference_{definition_name}"}
    code = compile(reference_source(definition_name), str(reference_path(definition_name)), "exec")
    exec(code, namespace)
    return namespace
