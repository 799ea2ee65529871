"""On a GPU: a kernel that corrupts its CUDA context and one that never ends are contained, and
the next workload in the same run passes; the timing methods agree on a real kernel, and CUPTI
still starts after the profiler timed a reference in the same process."""

from __future__ import annotations

import pytest

from fib_core.bench import Benchmark, BenchmarkConfig
from fib_core.bench.evaluation import timers
from fib_core.data.traceset import TraceSet

pytestmark = pytest.mark.gpu


def test_illegal_access_and_infinite_loop_are_contained(make_dataset):
    root = make_dataset(["gpu_illegal_access", "gpu_infinite_loop", "triton_axpy"])
    cfg = BenchmarkConfig(warmup_runs=2, iterations=5, num_trials=2, device="cuda",
                          timeout_seconds=20)
    with Benchmark(TraceSet.from_path(root), cfg) as bench:
        traces = bench.run_all(dump_traces=True)
        restarts = bench._workers_started
    got = {(t.solution, t.workload.uuid): t.evaluation for t in traces}
    crash = got[("gpu_illegal_access", "toy-0001-small")]
    assert crash.status.value == "RUNTIME_ERROR", crash.log
    assert "illegal memory access" in crash.log.lower() or "cuda" in crash.log.lower()
    hang = got[("gpu_infinite_loop", "toy-0001-small")]
    assert hang.status.value == "TIMEOUT", hang.log
    # The same run goes on: the next workload of each misbehaving solution passes, on a new worker.
    for name in ("gpu_illegal_access", "gpu_infinite_loop", "triton_axpy"):
        ev = got[(name, "toy-0002-large")]
        assert ev.status.value == "PASSED", (name, ev.log)
        assert ev.extra["device"] == "cuda"
        assert ev.performance.extra["timing_method"] in ("cupti", "profiler")
    assert got[("triton_axpy", "toy-0001-small")].status.value == "PASSED"
    # A worker serves one solution: the first one's two (one after its crash), the second
    # one's two (one after its hang), the third one's.
    assert restarts == 5


def test_timing_methods_agree_on_a_kernel(make_dataset):
    root = make_dataset(["triton_axpy"])
    latencies = {}
    for method in ("profiler", "events"):
        cfg = BenchmarkConfig(device="cuda", timing_method=method, iterations=20)
        with Benchmark(TraceSet.from_path(root), cfg) as bench:
            (trace,) = bench.run_all(dump_traces=False)[1:]
        ev = trace.evaluation
        assert ev.status.value == "PASSED", ev.log
        assert ev.performance.extra["timing_method"] == method
        latencies[method] = ev.performance.latency_ms
    if "timing_warnings" in ev.performance.extra:
        assert any("launch overhead" in w for w in ev.performance.extra["timing_warnings"])
    # Events include launch overhead, so they can only read higher (within noise).
    assert latencies["profiler"] <= latencies["events"] * 1.2
    assert latencies["profiler"] > 0


def test_cupti_still_starts_after_the_profiler_timed_a_reference():
    """The reference is timed with the profiler and the solution with CUPTI, in one judge or
    worker process: neither may leave CUPTI taken (a solution would fall back to the
    profiler). A reference-like call of 300 launches, then a one-kernel call, each way."""
    import torch

    why = timers.cupti_unavailable_reason()
    if why:
        pytest.skip(why)
    x = torch.ones(1 << 16, device="cuda")

    def many(i: int) -> None:
        y = x
        for _ in range(300):
            y = y * 1.0001

    def one(i: int) -> None:
        x.mul_(1.0)

    for first, then in (("profiler", "cupti"), ("cupti", "profiler"), ("profiler", "cupti")):
        a = timers.measure(many, lambda i: None, device="cuda", method=first, warmup=1,
                           iterations=3, trials=1)
        b = timers.measure(one, lambda i: None, device="cuda", method=then, warmup=1,
                           iterations=5, trials=2)
        assert (a.method, b.method) == (first, then), a.warnings + b.warnings
        assert a.kernels_per_call == 300 and b.kernels_per_call == 1
