"""A throw-away toy dataset per test, and a way to see every file a command created.

The toy operator is ``out = x + y`` over ``n`` rows of ``d = 8`` columns, with a reference in
plain PyTorch, so an engine run on the CPU takes a second.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]

TOY_DEFINITION = {
    "name": "toy_add",
    "op_type": "toy",
    "axes": {"n": {"type": "var"}, "d": {"type": "const", "value": 8}},
    "inputs": {
        "x": {"shape": ["n", "d"], "dtype": "float32"},
        "y": {"shape": ["n", "d"], "dtype": "float32"},
        "scale": {"shape": None, "dtype": "float32"},
    },
    "outputs": {"out": {"shape": ["n", "d"], "dtype": "float32"}},
    "reference": "def run(x, y, scale):\n    return x * scale + y\n",
}

CORRECT_SOURCE = "def run(x, y, scale, out):\n    out.copy_(x * scale + y)\n"


def workload(uuid: str = "w-1", n: int = 4, **inputs: dict) -> dict:
    """A workload record of the toy definition (random x and y, scale 2)."""
    spec = {
        "x": {"type": "random"},
        "y": {"type": "random"},
        "scale": {"type": "scalar", "value": 2.0},
    }
    spec.update(inputs)
    return {
        "definition": "toy_add",
        "solution": None,
        "workload": {"uuid": uuid, "axes": {"n": n}, "inputs": spec},
        "evaluation": None,
    }


def solution(name: str = "sol", source: str = CORRECT_SOURCE, dps: bool = True) -> dict:
    return {
        "name": name,
        "definition": "toy_add",
        "author": "tests",
        "spec": {
            "language": "python",
            "target_hardware": ["cpu"],
            "entry_point": "main.py::run",
            "destination_passing_style": dps,
        },
        "sources": [{"path": "main.py", "content": source}],
    }


@pytest.fixture
def make_dataset(tmp_path: Path) -> Callable[..., Path]:
    """make_dataset(definition=..., workloads=[...], solutions=[...]) -> dataset root."""

    def make(
        definition: dict | None = None,
        workloads: list[dict] | None = None,
        solutions: list[dict] | None = None,
        root: Path | None = None,
    ) -> Path:
        root = root or tmp_path / "ds"
        d = definition or TOY_DEFINITION
        (root / "definitions").mkdir(parents=True, exist_ok=True)
        (root / "definitions" / "toy_add.json").write_text(json.dumps(d))
        (root / "workloads").mkdir(exist_ok=True)
        lines = [json.dumps(w) for w in (workloads if workloads is not None else [workload()])]
        (root / "workloads" / "toy_add.jsonl").write_text("\n".join(lines) + "\n")
        for sol in solutions or []:
            folder = root / "solutions" / "tests"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{sol['name']}.json").write_text(json.dumps(sol))
        return root

    return make


def listing(folder: Path) -> set[str]:
    """Every path under ``folder`` (links not followed), relative, as POSIX strings."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            out.add(Path(dirpath, name).relative_to(folder).as_posix())
    return out


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """FIB_CACHE_DIR under the test's folder, so nothing lands in the user's cache."""
    path = tmp_path / "cache"
    monkeypatch.setenv("FIB_CACHE_DIR", str(path))
    return path


def run_cli(
    args: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float = 180,
    **popen: Any,
) -> subprocess.CompletedProcess:
    """``python -m fib_core ARGS`` from ``cwd`` with this checkout on the path."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "fib_core", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **popen,
    )
