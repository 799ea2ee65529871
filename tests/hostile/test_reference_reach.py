"""A solution walking the call stack and the worker's objects finds no reference: no function
of the harness that computes it, no outputs, in persistent and isolated mode alike (the
judge process holds them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_containment import _dataset, _run


@pytest.mark.parametrize("isolated", [False, True], ids=["persistent", "isolated"])
def test_walking_the_stack_finds_no_reference(tmp_path: Path, isolated: bool) -> None:
    root = _dataset(tmp_path / "dataset", ["correct", "walk_stack"])
    traces = {t.solution: t for t in _run(root, ["correct", "walk_stack"], isolated)}
    assert traces["correct"].evaluation.status == "PASSED"  # the run itself works
    walker = traces["walk_stack"].evaluation
    assert walker.status == "INCORRECT_NUMERICAL", walker.log  # it found nothing to copy
