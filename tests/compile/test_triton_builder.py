"""A Triton solution runs under Triton's interpreter on CPU tensors (no GPU needed)."""

from __future__ import annotations

import os

import pytest
import torch

from fib_core.compile import build

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="CPU run needs TRITON_INTERPRET=1"
)


@pytest.mark.parametrize("with_y", [True, False])
def test_triton_kernel_runs_in_the_interpreter(example_solution, toy_definition, with_y) -> None:
    sol = example_solution("triton_dps", language="triton", entry_point="kernel.py::run")
    x = torch.linspace(-3, 3, 1000)
    y = torch.linspace(0, 1, 1000) if with_y else None
    with build(sol, toy_definition) as runnable:
        out, neg = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
        runnable.run([x, y, 1.5, -2], [out, neg])
    want = 1.5 * x - 2 + (y if with_y else 0)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(neg, -want)


def test_without_a_gpu_or_the_interpreter_the_build_says_what_to_set(
    example_solution, toy_definition, monkeypatch
) -> None:
    """Not Triton's "0 active drivers" at the first launch: one line at the build."""
    from fib_core.errors import BuildError

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on a machine without one
    sol = example_solution("triton_dps", language="triton", entry_point="kernel.py::run")
    with pytest.raises(BuildError, match="set TRITON_INTERPRET=1"):
        build(sol, toy_definition)
