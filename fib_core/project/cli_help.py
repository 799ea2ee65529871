"""What makes ``python -m fib_core run`` as pleasant as ``run_local.py``.

- :func:`replace_stored_solution`: re-running an edited solution file replaces the copy a
  previous run stored in the dataset, with a note, instead of refusing it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fib_core.errors import FibError


def replace_stored_solution(
    solutions: dict[str, list[Any]], held: Any, new: Any, stored: Path | None, source: str
) -> str:
    """Swap ``held`` for ``new`` in ``solutions``; the note to print. Raises when the new copy
    would be filed elsewhere than the stored one (two files of one name would break the
    dataset): the message then names the file to remove."""
    if stored is not None and stored.parent.parent.name != _segment(new.author):
        raise FibError(
            f"--local {source}: solution {new.name!r} is already in the dataset at {stored} "
            f"(author {held.author!r}, other sources); remove that file, or rename yours "
            "(the `name` field)"
        )
    items = solutions.get(held.definition, [])
    if held in items:
        items.remove(held)
    solutions.setdefault(new.definition, []).append(new)
    where = f" at {stored}" if stored is not None else ""
    return (
        f"solution {new.name!r} changed since the copy stored in the dataset{where}; that copy "
        "is replaced by yours (its earlier traces stay, told apart by their solution_hash)"
    )


def _segment(text: str) -> str:
    # Imported here: fib_core.data.dataset_layout loads pydantic (~50 ms); this module's import does not.
    from fib_core.data.dataset_layout import path_segment

    return path_segment(text)
