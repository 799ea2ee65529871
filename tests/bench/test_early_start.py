"""A launcher boots the judge and the first worker ahead of the run; the Benchmark adopts them.

They boot while the launcher imports torch, loads the dataset and packs (seconds on a GPU
machine). Only processes that fit the run (role, device, sandbox paths, checking mode) are
adopted; the rest are killed, and none outlives the launcher.
"""

from __future__ import annotations

import pytest

from fib_core.bench import Benchmark, BenchmarkConfig, pool
from fib_core.data.solution import Solution
from fib_core.data.traceset import TraceSet

FAST = dict(warmup_runs=1, iterations=3, num_trials=2, device="cpu")


@pytest.fixture(autouse=True)
def _no_leftovers():
    yield
    pool.discard_early(remove_logs=True)
    pool._EARLY_DIRS.clear()


def test_the_benchmark_adopts_the_early_judge_and_worker(make_dataset, toy_solution_json):
    root = make_dataset([])
    pool.launch_early("cpu", root)
    early = {h.role: h for h in pool._EARLY}
    assert set(early) == {"worker", "judge"} and all(h.alive for h in early.values())
    solution = Solution.from_dict(toy_solution_json("correct"))
    with Benchmark(TraceSet.from_path(root), BenchmarkConfig(**FAST)) as bench:
        traces = bench.run_solution(solution)
        assert bench._judge is early["judge"] and bench._worker is early["worker"]
        assert bench._workers_started == 1
    assert pool._EARLY == []  # both adopted
    assert [t.evaluation.status.value for t in traces] == ["PASSED", "PASSED"]
    assert not early["worker"].alive and not early["judge"].alive  # stopped with the run


def test_an_early_worker_for_another_dataset_is_not_adopted(
    make_dataset, toy_solution_json, tmp_path
):
    """Its sandbox would protect the wrong folder: the run starts its own, and the early one
    is killed when the launcher discards what was not adopted."""
    root = make_dataset([])
    other = tmp_path / "other-dataset"
    other.mkdir()
    pool.launch_early("cpu", other)
    early = {h.role: h for h in pool._EARLY}
    solution = Solution.from_dict(toy_solution_json("correct"))
    with Benchmark(TraceSet.from_path(root), BenchmarkConfig(**FAST)) as bench:
        bench.run_solution(solution)
        assert bench._worker is not early["worker"]
        assert bench._judge is early["judge"]  # the judge has no sandbox: it fits
    assert pool._EARLY == [early["worker"]]
    pool.discard_early()
    assert pool._EARLY == [] and not early["worker"].alive


def test_early_processes_on_another_device_kind_are_replaced(make_dataset, toy_solution_json):
    """A process launched for "auto" resolves the device itself; if that is not the run's
    kind, the run kills it and starts its own instead."""
    root = make_dataset([])
    pool.launch_early("cpu", root)
    early = {h.role: h for h in pool._EARLY}
    solution = Solution.from_dict(toy_solution_json("correct"))
    with Benchmark(TraceSet.from_path(root), BenchmarkConfig(**FAST)) as bench:
        bench._kind = "cuda"  # pretend the run resolved to a GPU; the early ones say cpu
        bench.run_solution(solution)
        assert bench._worker is not early["worker"] and bench._judge is not early["judge"]
        assert not early["worker"].alive and not early["judge"].alive
        assert bench._workers_started == 1


def test_early_processes_from_another_cache_folder_are_not_adopted(
    make_dataset, toy_solution_json, tmp_path, monkeypatch
):
    """The judge signs and verifies with its cache folder's key and a worker's sandbox guards
    that folder: processes launched under another FIB_CACHE_DIR serve no run; a new launch
    first discards what an earlier one left."""
    root = make_dataset([])
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "first-cache"))
    pool.launch_early("cpu", root)
    stale = list(pool._EARLY)
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "second-cache"))
    solution = Solution.from_dict(toy_solution_json("correct"))
    with Benchmark(TraceSet.from_path(root), BenchmarkConfig(**FAST)) as bench:
        bench.run_solution(solution)
        assert bench._judge not in stale and bench._worker not in stale
    assert pool._EARLY == stale and all(h.alive for h in stale)
    pool.launch_early("cpu", root)  # a new launch: the stale ones go
    assert not any(h.alive for h in stale) and len(pool._EARLY) == 2
