"""Where a workload's time goes: phase seconds in the worker, the run's breakdown."""

from __future__ import annotations

import pytest

from fib_core.bench.evaluation.phases import PhaseClock, format_breakdown, harness_breakdown


def test_phase_clock_splits_time_between_announcements() -> None:
    clock = PhaseClock(started=10.0)
    clock.enter("build", now=10.5)
    clock.enter("timing", now=11.0)
    clock.enter("build", now=13.0)  # a repeated phase accumulates
    assert clock.finish(now=13.25) == {"setup": 0.5, "build": 0.75, "timing": 2.0}


def _trace(phases: dict, latency_ms: float | None, calls: tuple[int, int, int]) -> dict:
    warmup, iterations, trials = calls
    perf = None
    if latency_ms is not None:
        perf = {
            "latency_ms": latency_ms,
            "extra": {"warmup_runs": warmup, "iterations": iterations, "num_trials": trials},
        }
    return {
        "evaluation": {
            "extra": {"phase_seconds": phases, "harness_seconds": sum(phases.values())},
            "performance": perf,
        }
    }


def test_breakdown_sums_phases_and_counts_the_gpus_timed_calls() -> None:
    traces = [
        _trace({"build": 2.0, "timing": 1.0}, 0.5, (10, 50, 3)),  # 160 calls x 0.5 ms
        _trace({"reference": 3.0, "timing": 0.5}, None, (0, 0, 0)),  # failed: no GPU time
    ]
    totals = harness_breakdown(traces)
    assert totals["build"] == 2.0 and totals["timing"] == 1.5 and totals["reference"] == 3.0
    assert totals["worker_total"] == 6.5 and totals["workloads"] == 2
    assert totals["gpu_solution_s"] == pytest.approx(0.08)
    text = format_breakdown(totals, wall_s=8.0)
    assert "reference" in text and "harness share 99.0 %" in text
    cpu = format_breakdown(totals, wall_s=8.0, device="cpu")  # interpreter calls, no GPU
    assert "GPU" not in cpu.replace("several GPUs", "") and "harness share" not in cpu
    assert "timed calls (CPU)" in cpu and "wall-clock on the CPU" in cpu


def test_breakdown_of_several_gpus_sets_the_phases_against_their_wall_time_together() -> None:
    """Two GPUs' workers ran side by side: their 6.5 s of work over a 4 s run is not more
    than the run's wall time, and nothing reads as negative time outside the workers."""
    totals = harness_breakdown([
        _trace({"build": 2.0, "timing": 1.0}, 0.5, (10, 50, 3)),
        _trace({"reference": 3.0, "timing": 0.5}, None, (0, 0, 0)),
    ])
    text = format_breakdown(totals, wall_s=4.0, gpus=2)
    assert "reference               3.00 s  37.5 %" in text  # of 2 x 4 s
    assert "outside the worker      1.50 s" in text
    assert "4.00 s x 2 GPUs; harness share 99.0 %" in text


def test_breakdown_reads_trace_objects_and_their_flattened_dicts() -> None:
    from fib_core.data.trace import Trace

    data = {
        "definition": "d",
        "solution": "s",
        "workload": {"uuid": "u", "axes": {}, "inputs": {}},
        "evaluation": {
            "status": "PASSED",
            "log": "",
            "timestamp": "2026-01-01T00:00:00",
            "environment": {"hardware": "GPU", "libs": {}},
            "correctness": {"max_relative_error": 0.0, "max_absolute_error": 0.0},
            "performance": {
                "latency_ms": 2.0,
                "reference_latency_ms": 4.0,
                "speedup_factor": 2.0,
                "warmup_runs": 1,
                "iterations": 5,
                "num_trials": 3,
            },
            "phase_seconds": {"reference": 1.25},
            "harness_seconds": 2.5,
        },
    }
    trace = Trace.from_dict(data)
    for form in (trace, trace.to_dict()):
        totals = harness_breakdown([form])
        assert totals["reference"] == 1.25 and totals["worker_total"] == 2.5
        assert totals["gpu_solution_s"] == pytest.approx(0.032)
