"""Workloads and solutions the engine must turn into a status with a readable reason.

The engine runs once (CPU, one module-scoped run) over a toy dataset holding an impossible
workload and a solution that returns a meta-device tensor; each test reads its own pair.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import TOY_DEFINITION, listing, solution, workload

META_SOURCE = (
    "import torch\n\n\ndef run(x, y, scale):\n    return torch.empty(x.shape, device='meta')\n"
)


@pytest.fixture(scope="module")
def engine_run(tmp_path_factory):
    """(traces by (solution, workload uuid), files created outside the dataset and cache)."""
    import os

    from fib_core.bench import Benchmark, BenchmarkConfig
    from fib_core.data import TraceSet

    base = tmp_path_factory.mktemp("engine")
    root = base / "ds"
    (root / "definitions").mkdir(parents=True)
    (root / "definitions" / "toy_add.json").write_text(json.dumps(TOY_DEFINITION))
    (root / "workloads").mkdir()
    records = [workload("small", n=4), workload("huge", n=10**12)]
    (root / "workloads" / "toy_add.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records)
    )
    (root / "solutions").mkdir()
    for sol in (solution("correct"), solution("meta", META_SOURCE, dps=False)):
        (root / "solutions" / f"{sol['name']}.json").write_text(json.dumps(sol))
    before = listing(base)
    old = os.environ.get("FIB_CACHE_DIR")
    os.environ["FIB_CACHE_DIR"] = str(base / "cache")
    try:
        config = BenchmarkConfig(
            device="cpu",
            warmup_runs=0,
            iterations=1,
            num_trials=1,
            num_input_sets=1,
            timeout_seconds=120,
        )
        with Benchmark(TraceSet.from_path(root), config) as bench:
            traces = bench.run_all(dump_traces=True)
    finally:
        if old is None:
            os.environ.pop("FIB_CACHE_DIR")
        else:
            os.environ["FIB_CACHE_DIR"] = old
    created = {p for p in listing(base) - before if not p.startswith(("ds/", "cache"))}
    return {(t.solution, t.workload.uuid): t for t in traces}, created


def test_impossible_allocation(engine_run):
    traces, created = engine_run
    for sol in ("correct", "meta"):
        ev = traces[(sol, "huge")].evaluation
        assert ev.status.value == "RUNTIME_ERROR"
        assert ev.log.startswith(
            "inputs: workload huge (n=1000000000000) needs 87.3 TiB for its inputs and outputs "
            "(x 29.1 TiB, y 29.1 TiB, out 29.1 TiB), more than the "
        )
        assert ev.log.endswith(" of cpu memory; check the workload's axes")
        assert "Traceback" not in ev.log
    assert traces[("correct", "small")].evaluation.status.value == "PASSED"
    assert created == set()


def test_solution_returning_a_meta_device_tensor(engine_run):
    traces, created = engine_run
    ev = traces[("meta", "small")].evaluation
    assert ev.status.value == "RUNTIME_ERROR"
    assert ev.log == (
        "output 'out' is a meta-device tensor (a shape without data); return it on the inputs' "
        "device (cpu)"
    )
    assert created == set()


def test_memory_budget_counts_every_tensor(tmp_path: Path):
    """The estimate behind the allocation check: the shapes' elements times their dtype size."""
    from fib_core.bench.evaluation.memory_budget import human_bytes, tensor_bytes
    from fib_core.data import Definition

    definition = Definition.from_dict(TOY_DEFINITION)
    total, sizes = tensor_bytes(definition, {"n": 3, "d": 8})
    assert sizes == [("x", 96), ("y", 96), ("out", 96)] and total == 288
    assert human_bytes(288) == "288 B" and human_bytes(3 * 2**40) == "3.0 TiB"
