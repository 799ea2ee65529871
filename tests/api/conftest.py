"""A tiny dataset (out = alpha * x + y) written by the porting example's own maker."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "porting"


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"porting_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def tiny_root(tmp_path: Path) -> Path:
    return load_example("make_tiny_dataset").make(tmp_path / "dataset")
