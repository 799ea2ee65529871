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
