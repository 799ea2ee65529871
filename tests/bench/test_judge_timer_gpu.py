"""The judge's protocol on a real GPU: spans with the host's gaps, busy time, the hint.

A deliberately launch-bound call (two small kernels with the host busy 200 us between their
launches) must read about 200 us of span and a few microseconds of busy time, get the
launch-bound hint, and be labelled with the method really used; a device-bound call (one large
kernel) must read busy close to its span and get no hint. Where FlashInfer's CUPTI helper is
importable, the kit's CUPTI span of the device-bound call matches it.
"""

from __future__ import annotations

import statistics
import time

import pytest

from fib_core.bench.evaluation import timers

pytestmark = pytest.mark.gpu


def _spin(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


@pytest.fixture
def tensors():
    import torch

    small = torch.randn(1024, device="cuda")
    big = torch.randn(1 << 26, device="cuda")  # 256 MiB: a copy of it keeps the GPU busy
    return small, big, torch.empty_like(big)


def _methods() -> list[str]:
    return [m for m in ("cupti", "profiler") if m in timers.available_methods("cuda")]


@pytest.mark.parametrize("method", ["cupti", "profiler"])
def test_a_launch_bound_call_reads_its_gaps_and_gets_the_hint(tensors, method):
    if method not in _methods():
        pytest.skip(timers.cupti_unavailable_reason() or "not available")
    small, _, _ = tensors

    def call(_i: int) -> None:
        small.mul_(1.0)
        _spin(200)
        small.add_(0.0)

    r = timers.measure(call, lambda i: None, device="cuda:0", method=method, warmup=3,
                       iterations=20, trials=2)
    assert r.method == method
    assert 0.19 <= r.latency_ms <= 0.6, r.latency_ms  # the 200 us the GPU waited is counted
    assert r.busy_ms is not None and r.busy_ms < 0.05 * r.latency_ms
    assert r.kernels_per_call == 2
    assert any(w.startswith("launch-bound:") for w in r.warnings), r.warnings


@pytest.mark.parametrize("method", ["cupti", "profiler"])
def test_a_device_bound_call_is_busy_its_whole_span(tensors, method):
    if method not in _methods():
        pytest.skip(timers.cupti_unavailable_reason() or "not available")
    _, big, out = tensors
    r = timers.measure(lambda i: out.copy_(big), lambda i: None, device="cuda:0",
                       method=method, warmup=3, iterations=20, trials=2)
    assert r.busy_ms >= 0.95 * r.latency_ms
    assert not any(w.startswith("launch-bound:") for w in r.warnings)


def test_the_kit_reads_what_flashinfers_helper_reads(tensors):
    testing = pytest.importorskip("flashinfer.testing")
    if "cupti" not in _methods():
        pytest.skip(timers.cupti_unavailable_reason())
    _, big, out = tensors

    def copy() -> None:
        out.copy_(big)

    import torch

    # An idle GPU's clocks ramp up: run the copy for a while first, then alternate the two
    # timers, so neither is measured on a cold clock.
    ends = time.perf_counter() + 0.5
    while time.perf_counter() < ends:
        copy()
        torch.cuda.synchronize()
    kit, theirs = [], []
    for _ in range(3):
        kit.append(timers.measure(lambda i: copy(), lambda i: None, device="cuda:0",
                                  method="cupti", warmup=5, iterations=30, trials=3).latency_ms)
        theirs.append(statistics.fmean(
            statistics.median(testing.bench_gpu_time_with_cupti(
                fn=copy, dry_run_iters=5, repeat_iters=30, cold_l2_cache=True,
                use_cuda_graph=False))
            for _ in range(3)))
    print(f"256 MiB copy: kit {kit} ms, FlashInfer's helper {theirs} ms")
    # The first round can still read high (seen on an H200: the kit's first 0.174 ms, then
    # 0.127 ms, against 0.127 ms twice from FlashInfer's helper): the later rounds are compared.
    steady_kit, steady_theirs = statistics.fmean(kit[1:]), statistics.fmean(theirs[1:])
    assert abs(steady_kit / steady_theirs - 1) <= 0.05, (kit, theirs)
