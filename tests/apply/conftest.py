"""A toy dataset for the apply tests: two solutions that each win at different shapes.

Definition ``toy_shift`` (y = x + shift, x of shape [n, 4]); solution ``plus_one`` adds 1
(destination-passing), ``plus_two`` adds 2 (value-returning), so a call's result says which
ran; the original function adds 0. Traces are written by hand: ``plus_one`` is fastest at
n=1 and n=2, ``plus_two`` at n=8, nobody is recorded at n=5.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fib_core.apply import disable_apply, set_apply_hook
from fib_core.data import (
    Correctness,
    Definition,
    Environment,
    Evaluation,
    EvaluationStatus,
    Performance,
    RandomInput,
    Solution,
    Trace,
    TraceSet,
    Workload,
)

DEF_NAME = "toy_shift"

TOY_DEFINITION = {
    "name": DEF_NAME,
    "op_type": "toy",
    "axes": {"n": {"type": "var"}, "d": {"type": "const", "value": 4}},
    "inputs": {"x": {"shape": ["n", "d"], "dtype": "float32"}},
    "outputs": {"y": {"shape": ["n", "d"], "dtype": "float32"}},
    "reference": "def run(x):\n    return x\n",
}

SOURCES = {
    "plus_one": ("def run(x, y):\n    y.copy_(x + 1)\n", True),
    "plus_two": ("def run(x):\n    return x + 2\n", False),
    "broken": ("def run(x, y):\n    y.copy_(x + 3)\n", True),
}


def toy_solution(name: str) -> Solution:
    source, dps = SOURCES[name]
    return Solution.from_dict(
        {
            "name": name,
            "definition": DEF_NAME,
            "author": "tests",
            "spec": {
                "language": "python",
                "target_hardware": ["cpu"],
                "entry_point": "main.py::run",
                "destination_passing_style": dps,
            },
            "sources": [{"path": "main.py", "content": source}],
        }
    )


def toy_trace(
    solution: str,
    n: int,
    latency_ms: float,
    *,
    status: EvaluationStatus = EvaluationStatus.PASSED,
    abs_err: float = 0.0,
    rel_err: float = 0.0,
) -> Trace:
    passed = status is EvaluationStatus.PASSED
    return Trace(
        definition=DEF_NAME,
        workload=Workload(uuid=f"w-{n}", axes={"n": n}, inputs={"x": RandomInput()}),
        solution=solution,
        evaluation=Evaluation(
            status=status,
            log="",
            environment=Environment(hardware="cpu"),
            timestamp="2026-01-01T00:00:00",
            correctness=Correctness(max_relative_error=rel_err, max_absolute_error=abs_err)
            if status in (EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL)
            else None,
            performance=Performance(latency_ms, 1.0, 1.0 / latency_ms) if passed else None,
        ),
    )


def default_traces() -> list[Trace]:
    return [
        toy_trace("plus_one", 1, 0.10),
        toy_trace("plus_two", 1, 0.20),
        toy_trace("plus_one", 2, 0.10),
        toy_trace("plus_two", 2, 0.30),
        toy_trace("plus_one", 8, 0.50),
        toy_trace("plus_two", 8, 0.25),
    ]


def make_trace_set(traces: list[Trace] | None = None, solutions=("plus_one", "plus_two")):
    ts = TraceSet(root=None)
    ts.add_definition(Definition.from_dict(TOY_DEFINITION))
    for name in solutions:
        ts.add_solution(toy_solution(name))
    ts.add_traces(default_traces() if traces is None else traces)
    return ts


@pytest.fixture
def toy_set() -> Callable[..., TraceSet]:
    return make_trace_set


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """Every test gets its own cache folder and leaves no runtime or hook behind."""
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "cache"))
    yield
    disable_apply()
    set_apply_hook(None)
