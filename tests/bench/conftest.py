"""Fixtures of the engine tests: a toy definition (out = alpha * x + y) and a dataset factory.

The solutions under ``fixtures/solutions/`` are deliberately right, wrong or hostile; each test
builds a throw-away dataset folder holding the toy definition, its workloads and the solutions it
needs, then drives the real engine over it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

# name -> (destination-passing style, language)
TOY_SOLUTIONS: dict[str, tuple[bool, str]] = {
    "correct": (True, "python"),
    "wrong": (True, "python"),
    "wrong_shape": (False, "python"),
    "wrong_dtype": (False, "python"),
    "nan_output": (True, "python"),
    "unwritten": (True, "python"),
    "mutates_input": (True, "python"),
    "raises": (True, "python"),
    "kills_process": (True, "python"),
    "hangs": (True, "python"),
    "pointer_cache": (True, "python"),
    "lazy_after_checks": (True, "python"),
    "wrong_then_raises": (True, "python"),
    "wrong_timed_then_raises": (True, "python"),
    "content_cache": (True, "python"),
    "syntax_error": (True, "python"),
    "triton_axpy": (True, "triton"),
    "gpu_illegal_access": (True, "triton"),
    "gpu_infinite_loop": (True, "triton"),
}


def toy_solution_dict(name: str, definition: str = "toy_axpy") -> dict:
    dps, language = TOY_SOLUTIONS[name]
    folder = FIXTURES / "solutions"
    # A fixture that must not parse is stored as .py.txt so linters leave it alone.
    path = folder / f"{name}.py" if (folder / f"{name}.py").exists() else folder / f"{name}.py.txt"
    source = path.read_text()
    return {
        "name": name,
        "definition": definition,
        "author": "tests",
        "description": source.splitlines()[0].strip('"'),
        "spec": {
            "language": language,
            "target_hardware": ["cpu", "cuda"],
            "entry_point": "main.py::run",
            "dependencies": [],
            "destination_passing_style": dps,
        },
        "sources": [{"path": "main.py", "content": source}],
    }


@pytest.fixture
def toy_definition():
    from fib_core.data.definition import Definition

    return Definition.from_dict(json.loads((FIXTURES / "toy_axpy.json").read_text()))


@pytest.fixture
def toy_workloads():
    from fib_core.data.trace import Trace

    lines = (FIXTURES / "toy_axpy.jsonl").read_text().splitlines()
    return [Trace.from_dict(json.loads(line)).workload for line in lines if line.strip()]


@pytest.fixture
def make_dataset(tmp_path: Path) -> Callable[..., Path]:
    """make_dataset(["correct", "wrong"]) -> a dataset root with those toy solutions."""

    def make(solutions: list[str], root: Path | None = None) -> Path:
        root = root or tmp_path / "dataset"
        (root / "definitions" / "toy").mkdir(parents=True, exist_ok=True)
        (root / "workloads" / "toy").mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / "toy_axpy.json", root / "definitions" / "toy" / "toy_axpy.json")
        shutil.copy(FIXTURES / "toy_axpy.jsonl", root / "workloads" / "toy" / "toy_axpy.jsonl")
        sol_dir = root / "solutions" / "tests" / "toy_axpy"
        sol_dir.mkdir(parents=True, exist_ok=True)
        for name in solutions:
            (sol_dir / f"{name}.json").write_text(json.dumps(toy_solution_dict(name), indent=1))
        return root

    return make


@pytest.fixture
def toy_solution_json() -> Callable[[str], dict]:
    """The JSON dict of a toy solution, for tests that build a Solution by hand."""
    return toy_solution_dict
