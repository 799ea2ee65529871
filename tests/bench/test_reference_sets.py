"""The reference paid once: a fixed re-check pool, outputs on disk, latency from those calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from fib_core.bench import Benchmark, BenchmarkConfig
from fib_core.bench.evaluation.reference_sets import (
    checked_indices,
    run_references,
    timed_set_order,
)
from fib_core.data.solution import Solution
from fib_core.data.traceset import TraceSet


def test_rechecked_calls_get_the_pool_and_nothing_repeats() -> None:
    # 4 checked sets, pool of 4 (2 trials), 3 warm-up + 2 x 5 timed calls = 13 calls.
    rechecked = [5, 7, 11, 12]
    order = timed_set_order(40, 4, rechecked, 13)
    assert [order[i] for i in rechecked] == [4, 5, 6, 7]
    others = [order[i] for i in range(13) if i not in rechecked]
    assert len(set(others)) == len(others) and min(others) == 8
    assert len(set(order)) == 13  # every call sees inputs of its own


def test_too_few_sets_for_a_pool_cycles_after_the_checked_ones() -> None:
    assert timed_set_order(5, 4, [2, 3], 4) == [4, 0, 1, 2]
    assert timed_set_order(1, 1, [0], 3) == [0, 0, 0]


def test_checked_indices_cover_the_checked_sets_and_the_pool() -> None:
    assert checked_indices(100, 4, 3) == list(range(10))
    assert checked_indices(6, 4, 3) == list(range(6))


class _Calls:
    """Fake reference, timer and cache recording what was called."""

    def __init__(self, cached: dict[int, list]) -> None:
        self.cache = dict(cached)
        self.timed: list[list[int]] = []
        self.exact: list[int] = []
        self.fast: list[int] = []
        self.stored: list[int] = []

    def run(self, indices, *, fast: bool, timed_calls: int, need_latency: bool):
        def measure_exact(ks):
            self.timed.append(list(ks))
            return {k: [f"timed{k}"] for k in ks}, 12.5, {"timing_method": "profiler"}

        def exact(k):
            self.exact.append(k)
            return [f"exact{k}"]

        def fast_fn(k):
            self.fast.append(k)
            return [f"fast{k}"]

        def store(k, out):
            self.stored.append(k)
            self.cache[k] = out

        return run_references(
            indices,
            load=self.cache.get,
            store=store,
            measure_exact=measure_exact,
            exact=exact,
            fast=fast_fn if fast else None,
            timed_calls=timed_calls,
            need_latency=need_latency,
        )


def test_cold_run_times_the_exact_calls_and_fills_the_rest_fast() -> None:
    calls = _Calls({})
    run = calls.run(range(6), fast=True, timed_calls=2, need_latency=True)
    assert calls.timed == [[0, 1]] and calls.fast == [2, 3, 4, 5] and calls.exact == []
    assert sorted(calls.stored) == [0, 1, 2, 3, 4, 5] and run.computed == 6
    assert run.outputs[0] == ["timed0"] and run.outputs[5] == ["fast5"]
    assert run.latency_ms == 12.5 and run.latency_extra["timing_method"] == "profiler"


def test_warm_run_makes_no_reference_call() -> None:
    calls = _Calls({k: [f"disk{k}"] for k in range(6)})
    run = calls.run(range(6), fast=True, timed_calls=2, need_latency=False)
    assert calls.timed == [] and calls.exact == calls.fast == [] and run.computed == 0
    assert run.outputs[3] == ["disk3"] and run.latency_ms is None


def test_outputs_cached_but_latency_missing_reruns_only_the_timed_calls() -> None:
    calls = _Calls({k: [f"disk{k}"] for k in range(6)})
    run = calls.run(range(6), fast=False, timed_calls=3, need_latency=True)
    assert calls.timed == [[0, 1, 2]] and calls.exact == [] and run.latency_ms == 12.5
    assert run.outputs[4] == ["disk4"] and run.outputs[1] == ["timed1"]


def test_without_a_fast_reference_the_untimed_sets_use_the_reference() -> None:
    calls = _Calls({2: ["disk2"]})
    run = calls.run(range(4), fast=False, timed_calls=1, need_latency=True)
    assert calls.timed == [[0]] and calls.exact == [1, 3] and run.outputs[2] == ["disk2"]


def test_second_run_loads_every_checked_set_from_disk(
    make_dataset, toy_solution_json, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("FIB_CACHE_DIR", str(cache))
    ts = TraceSet.from_path(make_dataset([]))
    solution = Solution.from_dict(toy_solution_json("correct"))
    cfg = BenchmarkConfig(warmup_runs=1, iterations=3, num_trials=2, device="cpu")
    with Benchmark(ts, cfg) as bench:
        first = bench.run_solution(solution)
    files = sorted((cache / "reference").rglob("*.safetensors"))
    # two workloads x (4 checked sets + a pool of 2 per trial)
    assert len(files) == 2 * (4 + 4)
    stamps = {f: f.stat().st_mtime_ns for f in files}
    with Benchmark(ts, cfg) as bench:
        second = bench.run_solution(solution)
    assert [t.evaluation.status.value for t in first + second] == ["PASSED"] * 4
    assert {f: f.stat().st_mtime_ns for f in files} == stamps  # nothing recomputed
    for a, b in zip(first, second, strict=True):
        ref_a = a.evaluation.performance.extra["reference_timing"]
        ref_b = b.evaluation.performance.extra["reference_timing"]
        assert ref_b.get("cached") is True and "cached" not in ref_a
        assert (
            b.evaluation.performance.reference_latency_ms
            == a.evaluation.performance.reference_latency_ms
        )
        assert set(b.evaluation.extra["phase_seconds"]) >= {"build", "reference", "timing"}
