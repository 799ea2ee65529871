"""``PythonBuilder``: the organizers' builder for ``language = "python"`` solutions."""

from __future__ import annotations

from typing import Any

from ..builder import Builder, language_is


class PythonBuilder(Builder):
    """Python solutions, imported as a private package by the kit's python builder."""

    def can_build(self, sol: Any) -> bool:
        return language_is(sol, "python")
