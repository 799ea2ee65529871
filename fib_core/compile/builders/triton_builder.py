"""``TritonBuilder``: the organizers' builder for ``language = "triton"`` solutions."""

from __future__ import annotations

from typing import Any

from ..builder import Builder, language_is
from .python_builder import PythonBuilder


class TritonBuilder(Builder):
    """Triton solutions: Python modules whose kernels Triton compiles on first call.

    ``py_builder`` is kept for the organizers' constructor shape; Triton sources load through
    the same kit python builder, so nothing is delegated to it.
    """

    def __init__(self, py_builder: PythonBuilder | None = None) -> None:
        super().__init__()
        self.py_builder = py_builder if py_builder is not None else PythonBuilder()

    def can_build(self, sol: Any) -> bool:
        return language_is(sol, "triton")
