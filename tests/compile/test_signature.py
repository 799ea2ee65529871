"""Signature check: the DPS/value-returning mismatch message and its config.toml key."""

from __future__ import annotations

import pytest
import torch

from fib_core.compile import build, check_signature
from fib_core.errors import SignatureError

from .conftest import solution_from_sources

DPS_MISMATCH = (
    "expected run(x, y, alpha, shift, out, neg) (destination-passing style: inputs then "
    "outputs), got run(x, y, alpha, shift); set `destination_passing_style = false` under "
    "[build] in config.toml if your function returns its outputs"
)


def test_value_returning_function_built_as_dps_gets_the_exact_message(toy_definition) -> None:
    sol = solution_from_sources({"main.py": "def run(x, y, alpha, shift):\n    return x, x\n"},
                                language="python", entry_point="main.py::run", dps=True)
    with pytest.raises(SignatureError) as info:
        build(sol, toy_definition)
    assert str(info.value) == DPS_MISMATCH


def test_dps_function_built_as_value_returning_points_to_the_true_setting(toy_definition) -> None:
    def run(x, y, alpha, shift, out, neg):
        pass

    with pytest.raises(SignatureError) as info:
        check_signature(run, toy_definition, dps=False)
    msg = str(info.value)
    assert msg.startswith("expected run(x, y, alpha, shift) (value-returning style: returns out, neg)")
    assert "got run(x, y, alpha, shift, out, neg)" in msg
    assert "`destination_passing_style = true` under [build] in config.toml" in msg


def test_other_count_mismatch_says_what_to_take(toy_definition) -> None:
    def run(x, y):
        pass

    with pytest.raises(SignatureError, match="take the inputs, then the preallocated outputs"):
        check_signature(run, toy_definition, dps=True)


@pytest.mark.parametrize(
    "source",
    [
        "def run(*args):\n    pass\n",
        "def run(x, y, alpha, shift, out, neg, debug=False):\n    pass\n",
        "def run(x, *rest):\n    pass\n",
    ],
)
def test_compatible_signatures_pass(toy_definition, source: str) -> None:
    namespace: dict = {}
    exec(source, namespace)
    check_signature(namespace["run"], toy_definition, dps=True)


def test_invisible_signature_is_not_guessed(toy_definition) -> None:
    check_signature(max, toy_definition, dps=True)  # builtins hide their parameters


def test_value_returning_function_returning_too_few_outputs_fails_at_run(toy_definition) -> None:
    sol = solution_from_sources({"main.py": "def run(x, y, alpha, shift):\n    return None\n"},
                                language="python", entry_point="main.py::run", dps=False)
    with build(sol, toy_definition) as runnable, pytest.raises(SignatureError) as info:
        runnable.run([torch.ones(2), None, 1.0, 0])
    assert "returned None, expected 2 (out, neg)" in str(info.value)
    assert "destination_passing_style = true" in str(info.value)
