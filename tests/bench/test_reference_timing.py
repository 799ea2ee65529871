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
from fib_core.bench.evaluate import Evaluator, _Prepared
from fib_core.bench.timing import TimingResult, choose_method


@pytest.fixture
def timed_methods(monkeypatch):
    """Runs Evaluator._reference_latency on a pretend GPU; returns the methods measure() got."""
    seen: list[str] = []

    def fake_measure(call, prepare, *, device, method, warmup, iterations, trials, flusher):
        seen.append(method)
        prepare(0)
        call(0)
        return TimingResult(1.5, method, [{"median": 1.5}], {"median": 1.5}, warmup, iterations)

    monkeypatch.setattr(evaluate, "measure", fake_measure)
    monkeypatch.setattr(evaluate, "load_reference", lambda definition: lambda *args: None)
    return seen


def _reference_method(toy_definition, toy_workloads, requested: str) -> tuple[str, dict]:
    ev = Evaluator("cuda:0", EnvironmentInfo(device_kind="cuda", hardware=f"Fake GPU {requested}"))
    ev._sync = lambda: None  # type: ignore[method-assign]
    ev._get_flusher = lambda: None  # type: ignore[method-assign]
    ev._load_set = lambda working, pristine, which: None  # type: ignore[method-assign]
    x = torch.zeros(4)
    prep = _Prepared(sets=[[x, x, 1.0]], refs={}, working=[x, x, 1.0], rotating=[], axes={})
    cfg = BenchmarkConfig(timing_method=requested)
    latency, extra = ev._reference_latency(toy_definition, toy_workloads[0], prep, cfg)
    assert latency == 1.5
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
