"""The registry picks a builder from the spec's declared fields."""

from __future__ import annotations

import pytest

from fib_core.compile import find_builder
from fib_core.errors import BuildError

from .conftest import solution_from_sources


@pytest.mark.parametrize(
    ("language", "entry", "binding", "builder"),
    [
        ("python", "a.py::run", None, "python"),
        ("triton", "a.py::run", None, "python"),
        ("cuda", "a.cu::run", None, "tvm-ffi"),
        ("cpp", "a.cpp::run", "tvm-ffi", "tvm-ffi"),
        ("cuda", "a.cu::run", "torch", "torch"),
        ("cpp", "a.cpp::run", "torch", "torch"),
    ],
)
def test_builder_follows_language_and_binding(language, entry, binding, builder) -> None:
    sol = solution_from_sources({entry.split("::")[0]: ""}, language=language, entry_point=entry,
                                binding=binding)
    assert find_builder(sol).name == builder


def test_language_without_builder_is_a_build_error() -> None:
    sol = solution_from_sources({"a.py": ""}, language="tilelang", entry_point="a.py::run")
    with pytest.raises(BuildError, match="no builder for language = 'tilelang'"):
        find_builder(sol)
