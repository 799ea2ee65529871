"""Errors of the dataset layer beyond the shared ones in :mod:`fib_core.errors`.

Each also derives from the builtin exception the TraceSet API documents (FileNotFoundError,
ValueError), so code written against that API catches them unchanged.
"""

from __future__ import annotations

from pathlib import Path

from fib_core.errors import FibError


class DatasetNotFoundError(FibError, FileNotFoundError):
    """A dataset folder, or a file it should hold, does not exist."""

    def __init__(self, path: str | Path, what: str, hint: str) -> None:
        self.path = str(path)
        super().__init__(f"{self.path}: {what} not found ({hint})")

    def __str__(self) -> str:  # FileNotFoundError would otherwise print its errno form
        return self.args[0]


class DatasetError(FibError, ValueError):
    """A request the dataset cannot satisfy (unknown definition, no root folder, file exists)."""


class BaselineError(DatasetError):
    """Scoring needs exactly one solution of the baseline author for a definition."""


class UnknownDefinitionError(FibError, KeyError):
    """A definition name that the dataset does not hold."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        shown = ", ".join(sorted(known)[:8]) + (", ..." if len(known) > 8 else "")
        super().__init__(f"definition {name!r} is not in the dataset (known: {shown or 'none'})")

    def __str__(self) -> str:  # KeyError would otherwise print the message quoted
        return self.args[0]
