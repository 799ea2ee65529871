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


def test_only_a_worker_nothing_runs_beside_makes_its_context_as_it_boots(
    make_dataset, toy_solution_json
):
    """The early worker and a run's own first worker get --context-at-start; an isolated
    run's spare (booting beside a timed worker) and the judge do not."""
    root = make_dataset([])
    pool.launch_early("cpu", root)
    early = {h.role: h for h in pool._EARLY}
    assert early["worker"].context_at_start and not early["judge"].context_at_start
    pool.discard_early()
    solution = Solution.from_dict(toy_solution_json("correct"))
    with Benchmark(TraceSet.from_path(root), BenchmarkConfig(**FAST, isolated=True)) as bench:
        first = bench._new_worker(spare=False)
        spare = bench._new_worker()
        assert first.context_at_start and not spare.context_at_start
        traces = bench.run_solution(solution)
    assert [t.evaluation.status.value for t in traces] == ["PASSED", "PASSED"]


def test_the_early_context_is_the_driver_primary_context_of_the_device(monkeypatch):
    """The thread calls the driver API only (cuInit, cuDeviceGet of the device's index,
    cuDevicePrimaryCtxRetain); without a GPU or a driver there is no thread."""
    import ctypes

    from fib_core.bench import exchange, worker

    calls = []

    class Driver:
        def cuInit(self, flags):
            calls.append(("cuInit", flags))
            return 0

        def cuDeviceGet(self, handle, index):
            calls.append(("cuDeviceGet", index))
            ctypes.cast(handle, ctypes.POINTER(ctypes.c_int)).contents.value = 7
            return 0

        def cuDevicePrimaryCtxRetain(self, context, handle):
            calls.append(("cuDevicePrimaryCtxRetain", handle.value))
            return 0

    monkeypatch.setattr(exchange, "cuda_driver", lambda: Driver())
    assert worker._open_context_early("cpu") is None
    thread = worker._open_context_early("cuda:1")
    worker._settle_context("cpu", thread)  # waits for the thread
    assert not thread.is_alive()
    assert calls == [("cuInit", 0), ("cuDeviceGet", 1), ("cuDevicePrimaryCtxRetain", 7)]
    monkeypatch.setattr(exchange, "cuda_driver", lambda: None)
    assert worker._open_context_early("cuda:0") is None
