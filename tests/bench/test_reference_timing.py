"""The reference is timed with the solution's method, as the organizers time both sides.

A speedup is reference latency / solution latency; it compares like with like only if both are
the same quantity. The organizers time both with one CUPTI span, so the kit must not time the
reference with CUDA events (launch overhead included) while the solution gets a device-side span.
"""

from __future__ import annotations

import pytest
import torch

from fib_core.bench import evaluate, timing
from fib_core.bench.config import BenchmarkConfig
from fib_core.bench.environment import EnvironmentInfo
from fib_core.bench.evaluate import Evaluator
from fib_core.bench.timing import TimingResult, choose_method


@pytest.fixture
def timed_methods(monkeypatch, tmp_path):
    """Runs the evaluator's reference step on a pretend GPU; returns the methods measure() got.

    The reference's latency is taken from the calls that compute its checked outputs
    (fib_core.bench.reference_sets), so that step is where the method is chosen."""
    seen: list[str] = []

    def fake_measure(call, prepare, *, device, method, warmup, iterations, trials, flusher):
        seen.append(method)
        for i in range(warmup + iterations):
            prepare(i)
            call(i)
        return TimingResult(1.5, method, [{"median": 1.5}], {"median": 1.5}, warmup, iterations)

    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(evaluate, "measure", fake_measure)
    monkeypatch.setattr(evaluate, "reference_run", lambda definition: lambda x, y, alpha: alpha * x + y)
    return seen


def _reference_method(toy_definition, toy_workloads, requested: str) -> tuple[str, dict]:
    ev = Evaluator("cpu", EnvironmentInfo(device_kind="cuda", hardware=f"Fake GPU {requested}"))
    ev.kind = "cuda"  # a pretend GPU: tensors stay on the CPU
    ev._get_flusher = lambda: None  # type: ignore[method-assign]
    x = torch.zeros(4)
    cfg = BenchmarkConfig(timing_method=requested, num_input_sets=1, num_trials=1)
    refs, (latency, extra) = ev._references(toy_definition, toy_workloads[0], [[x, x, 1.0]], cfg)
    assert latency == 1.5 and set(refs) == {0}
    return extra["timing_method"], extra


@pytest.mark.parametrize("requested", ["auto", "profiler", "cupti", "events"])
def test_reference_gets_the_solutions_method(
    monkeypatch, timed_methods, toy_definition, toy_workloads, requested
):
    monkeypatch.setattr(timing, "_cupti_module", lambda: object())  # CUPTI installed
    solution_method, _ = choose_method(requested, "cuda")  # what _time_solution uses
    method, _ = _reference_method(toy_definition, toy_workloads, requested)
    assert timed_methods == [solution_method] and method == solution_method
    if requested == "auto":
        assert method == "profiler"  # a device-side span, not CUDA events


def test_reference_without_cupti_falls_back_like_the_solution(
    monkeypatch, timed_methods, toy_definition, toy_workloads
):
    monkeypatch.setattr(timing, "_cupti_module", lambda: None)
    method, _ = _reference_method(toy_definition, toy_workloads, "cupti")
    assert method == choose_method("cupti", "cuda")[0] == "profiler"
