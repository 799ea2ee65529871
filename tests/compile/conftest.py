"""Fixtures for the compile tests: the toy definition and solutions built from fixture folders."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from fib_core.data import Definition, Solution

FIXTURES = Path(__file__).parent / "fixtures"

SolutionFactory = Callable[..., Solution]


@pytest.fixture(scope="session")
def toy_definition() -> Definition:
    return Definition.from_dict(json.loads((FIXTURES / "toy_axpby.json").read_text()))


def solution_from_sources(
    sources: dict[str, str],
    *,
    language: str,
    entry_point: str,
    dps: bool = True,
    binding: str | None = None,
    dependencies: list[str] | None = None,
    name: str = "toy",
    definition: str = "fib_toy_axpby",
) -> Solution:
    spec: dict = {
        "language": language,
        "target_hardware": ["H100", "B200"],
        "entry_point": entry_point,
        "destination_passing_style": dps,
        "dependencies": dependencies or [],
    }
    if binding is not None:
        spec["binding"] = binding
    return Solution.from_dict({
        "name": name,
        "definition": definition,
        "author": "tests",
        "spec": spec,
        "sources": [{"path": p, "content": c} for p, c in sorted(sources.items())],
    })


def fixture_sources(folder: str) -> dict[str, str]:
    root = FIXTURES / folder
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="session")
def example_solution() -> SolutionFactory:
    """``example_solution("cuda_tvm", language="cuda", entry_point="kernel.cu::run")``."""

    def make(folder: str, **kwargs) -> Solution:
        return solution_from_sources(fixture_sources(folder), name=folder, **kwargs)

    return make


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    """A fresh build cache per test, so cache hits are the test's own doing."""
    return tmp_path / "cache"
