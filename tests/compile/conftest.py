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


# Headers torch's C++/CUDA extension headers include: a toolkit without them (a slim nvcc-only
# install, a pip-installed nvcc) cannot build a torch-binding CUDA solution.
TORCH_EXTENSION_HEADERS = ("cuda_runtime.h", "cusparse.h", "cublas_v2.h", "cusolverDn.h")


def incomplete_cuda_toolkit() -> str | None:
    """Why the CUDA toolkit cannot build torch-binding extensions (None when it can)."""
    from fib_core.compile.toolchain import find_cuda_home
    from fib_core.errors import BuildError

    try:
        home = find_cuda_home()
    except BuildError as err:
        return str(err)
    folders = [home / "include", *(home / "targets").glob("*/include")]
    missing = [h for h in TORCH_EXTENSION_HEADERS if not any((f / h).is_file() for f in folders)]
    if missing:
        return f"the CUDA toolkit at {home} lacks {', '.join(missing)} (incomplete install)"
    return None
