"""A small dataset folder with hand-made traces, written through the real data layer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fib_core.data import Definition, Solution, Trace
from fib_core.data.traceset import TraceSet

DEF = "vec_scale_f32"
UUIDS = ["aaaa0001-0000-0000-0000-000000000000", "bbbb0002-0000-0000-0000-000000000000",
         "cccc0003-0000-0000-0000-000000000000"]


def definition() -> Definition:
    return Definition.from_dict({
        "name": DEF,
        "op_type": "toy",
        "axes": {"n": {"type": "var"}},
        "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
        "reference": "def run(x):\n    return 2.0 * x\n",
    })


def solution(name: str, author: str) -> Solution:
    return Solution.from_dict({
        "name": name,
        "definition": DEF,
        "author": author,
        "spec": {"language": "python", "target_hardware": ["cpu"],
                 "entry_point": "main.py::run", "destination_passing_style": False},
        "sources": [{"path": "main.py", "content": "def run(x):\n    return x + x\n"}],
    })


def workload(uuid: str, n: int) -> dict[str, Any]:
    return {"uuid": uuid, "axes": {"n": n}, "inputs": {"x": {"type": "random"}}}


def trace(sol: str, uuid: str, n: int, status: str = "PASSED", latency: float = 1.0,
          ref: float = 2.0) -> Trace:
    ev: dict[str, Any] = {
        "status": status, "log": "" if status == "PASSED" else "ValueError: bad output",
        "environment": {"hardware": "NVIDIA H100 80GB HBM3", "libs": {}},
        "timestamp": "2025-01-01T00:00:00", "correctness": None, "performance": None,
    }
    if status in ("PASSED", "INCORRECT_NUMERICAL"):
        ev["correctness"] = {"max_relative_error": 0.0 if status == "PASSED" else 0.5,
                             "max_absolute_error": 0.0 if status == "PASSED" else 1.0}
    if status == "PASSED":
        ev["performance"] = {"latency_ms": latency, "reference_latency_ms": ref,
                             "speedup_factor": ref / latency}
    return Trace.from_dict({"definition": DEF, "solution": sol, "workload": workload(uuid, n),
                            "evaluation": ev})


def write_dataset(root: Path, traces: list[Trace]) -> Path:
    ts = TraceSet(root=root)
    ts.add_definition(definition())
    ts.add_solution(solution("fast", "alice"))
    ts.add_solution(solution("broken", "bob"))
    ts.add_workload_traces(
        Trace.from_dict({"definition": DEF, "solution": None, "workload": workload(u, n),
                         "evaluation": None})
        for u, n in zip(UUIDS, (16, 1024, 65536), strict=True)
    )
    ts.add_traces(traces)
    return root


@pytest.fixture
def small_dataset(tmp_path: Path) -> Path:
    """'fast' passes all three workloads (speedups 2, 4, 3: score 3); 'broken' fails one.

    'fast' first failed workload cccc0003 and then passed it: only the newer trace counts.
    """
    return write_dataset(tmp_path / "ds", [
        trace("fast", UUIDS[0], 16, latency=1.0, ref=2.0),
        trace("fast", UUIDS[1], 1024, latency=0.5, ref=2.0),
        trace("fast", UUIDS[2], 65536, "RUNTIME_ERROR"),
        trace("fast", UUIDS[2], 65536, latency=2.0, ref=6.0),
        trace("broken", UUIDS[0], 16, latency=0.25, ref=2.0),
        trace("broken", UUIDS[1], 1024, "INCORRECT_NUMERICAL"),
        trace("broken", UUIDS[2], 65536, latency=1.0, ref=6.0),
    ])


@pytest.fixture
def dataset_writer():
    """write_dataset(root, traces) and trace(sol, uuid, n, status, latency, ref) builders."""
    return write_dataset, trace
