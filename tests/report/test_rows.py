"""Traces -> rows: every figure read from the right place, failures explained in one line."""

from __future__ import annotations

from typing import Any

import pytest

from fib_core.data.trace import Trace
from fib_core.errors import FibError
from fib_core.report.results import RunResults, results_by_solution
from fib_core.report.rows import failure_reason, log_tail

DEF = "gdn_decode_qk4_v8_d128_k_last"
H100 = "NVIDIA H100 80GB HBM3"


def trace(uuid: str, status: str = "PASSED", *, solution: str = "sol", latency: float = 0.01,
          ref: float = 0.05, log: str = "", hardware: str = H100, batch: int = 1,
          perf_extra: dict[str, Any] | None = None, ev_extra: dict[str, Any] | None = None,
          definition: str = DEF) -> Trace:
    ev: dict[str, Any] = {
        "status": status,
        "log": log,
        "environment": {"hardware": hardware, "libs": {"torch": "2.11"}},
        "timestamp": "2025-01-01T00:00:00",
        "correctness": None,
        "performance": None,
    }
    if status in ("PASSED", "INCORRECT_NUMERICAL"):
        ev["correctness"] = {"max_relative_error": 0.02, "max_absolute_error": 0.001}
    if status == "PASSED":
        ev["performance"] = {"latency_ms": latency, "reference_latency_ms": ref,
                             "speedup_factor": ref / latency, **(perf_extra or {})}
    ev.update(ev_extra or {})
    return Trace.from_dict({
        "definition": definition,
        "solution": solution,
        "workload": {"uuid": uuid, "axes": {"batch_size": batch}, "inputs": {}},
        "evaluation": ev,
    })


def test_passed_trace_figures_and_spread():
    t = trace("u1", latency=0.01, ref=0.05, batch=4,
              perf_extra={"p10_ms": 0.009, "p90_ms": 0.012, "std_ms": 0.001, "min_ms": 0.0085,
                          "timing_method": "cupti"})
    res = RunResults.from_traces([t], DEF, author="me")
    (row,) = res.rows
    assert (row.uuid, row.axes, row.status) == ("u1", {"batch_size": 4}, "PASSED")
    assert row.latency_ms == 0.01 and row.reference_latency_ms == 0.05
    assert row.speedup == pytest.approx(5.0)
    assert (row.max_abs_error, row.max_rel_error) == (0.001, 0.02)
    assert (row.spread.p10_ms, row.spread.p90_ms, row.spread.min_ms) == (0.009, 0.012, 0.0085)
    assert row.timing_method == "cupti" and row.reason == "" and row.log_tail == []
    assert (res.solution, res.author, res.device, res.gpu_name) == ("sol", "me", "cuda", H100)
    assert res.environment["hardware"] == H100


def test_nested_spread_is_read_too():
    t = trace("u1", perf_extra={"spread": {"p10": 1.0, "p90": 2.0}})
    row = RunResults.from_traces([t], DEF).rows[0]
    assert (row.spread.p10_ms, row.spread.p90_ms, row.spread.std_ms) == (1.0, 2.0, None)


def test_failure_reason_and_log_tail():
    log = "\n".join(
        [f"step {i}" for i in range(20)]
        + ["Traceback (most recent call last):", '  File "k.py", line 3, in run',
           "torch.AcceleratorError: CUDA error: an illegal memory access was encountered", ""]
    )
    row = RunResults.from_traces([trace("u1", "RUNTIME_ERROR", log=log)], DEF).rows[0]
    assert row.reason == "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
    assert len(row.log_tail) == 10 and row.log_tail[-1].startswith("torch.AcceleratorError")
    assert row.latency_ms is None and row.max_abs_error is None
    numerical = trace("u2", "INCORRECT_NUMERICAL", ev_extra={"reason": "12 of 4096 elements off\nmore"})
    row2 = RunResults.from_traces([numerical], DEF).rows[0]
    assert row2.reason == "12 of 4096 elements off more" and row2.max_abs_error == 0.001


def test_failure_reason_fallbacks():
    assert failure_reason("TIMEOUT", "", {}) == "timeout"
    assert failure_reason("TIMEOUT", "waiting\nstill waiting\n", {}) == "still waiting"
    assert len(failure_reason("RUNTIME_ERROR", "ValueError: " + "x" * 500, {})) == 200
    assert log_tail("a\n\n b \nc", n=2) == [" b", "c"]


def test_latest_trace_per_workload_wins_and_other_definitions_are_ignored():
    traces = [
        trace("u1", "RUNTIME_ERROR", log="RuntimeError: boom"),
        trace("u2", latency=0.02),
        trace("u1", latency=0.03),
        trace("u9", definition="other_def"),
    ]
    res = RunResults.from_traces(traces, DEF)
    assert [r.uuid for r in res.rows] == ["u1", "u2"]
    assert res.row("u1").passed and res.row("u1").latency_ms == 0.03


def test_several_solutions_need_a_choice():
    traces = [trace("u1", solution="a"), trace("u1", solution="b")]
    with pytest.raises(FibError, match="several solutions"):
        RunResults.from_traces(traces, DEF)
    assert RunResults.from_traces(traces, DEF, solution="b").solution == "b"
    groups = results_by_solution(traces, authors={"a": "alice"})
    assert [(g.solution, g.author) for g in groups] == [("a", "alice"), ("b", None)]


def test_cpu_device_is_detected():
    t = trace("u1", hardware="cpu (x86_64, 2 cores)")
    res = RunResults.from_traces([t], DEF)
    assert res.device == "cpu" and res.is_cpu_smoke and res.gpu_name is None
    t2 = trace("u1", ev_extra={"device": "cpu"})
    assert RunResults.from_traces([t2], DEF).device == "cpu"


# The report's roofline figures come from the real dataset module (importable on CPU). An
# H100 SXM's datasheet peaks: 3350 GB/s, 989.4 dense bf16 TFLOP/s, 1978.9 fp8.
H100_GBS, H100_BF16_TFLOPS, H100_FP8_TFLOPS = 3350e9, 989.4e12, 1978.9e12


def test_roofline_figures_compute_bound_from_the_engines_cost():
    exact = {"bytes": 1e6, "flops": 1e13, "dtype": "bfloat16"}
    row = RunResults.from_traces([trace("u1", latency=20.0, perf_extra={"cost": exact})],
                                 DEF).rows[0]
    # floor = 1e13 flop / 989.4e12 flop/s = 10.107 ms (bytes: 0.3 us) against 20 ms measured;
    # 1e13 flop in 20 ms = 500 TFLOP/s.
    assert row.floor_ms == pytest.approx(1e13 / H100_BF16_TFLOPS * 1e3, rel=1e-9)
    assert row.roofline_fraction == pytest.approx(1e13 / H100_BF16_TFLOPS / 0.02, rel=1e-9)
    assert row.achieved.unit == "TFLOP/s" and row.achieved.value == pytest.approx(500.0)
    fp8 = {**exact, "dtype": "float8_e4m3fn"}  # fp8 work runs at the fp8 peak
    row = RunResults.from_traces([trace("u1", latency=20.0, perf_extra={"cost": fp8})],
                                 DEF).rows[0]
    assert row.floor_ms == pytest.approx(1e13 / H100_FP8_TFLOPS * 1e3, rel=1e-9)


def test_roofline_prefers_the_engines_exact_cost():
    """The engine counts data-dependent work (MoE routing) on the real inputs: it wins."""
    exact = {"bytes": 2e6, "flops": 1e6, "dtype": "bfloat16"}
    with_cost = trace("u1", latency=0.01, perf_extra={"cost": exact})
    row = RunResults.from_traces([with_cost], DEF).rows[0]
    model = RunResults.from_traces([trace("u1", latency=0.01)], DEF).rows[0]
    # floor = 2e6 B / 3350 GB/s = 0.597 us against 10 us measured; 2e6 B in 10 us = 200 GB/s
    assert row.floor_ms == pytest.approx(2e6 / H100_GBS * 1e3, rel=1e-9)
    assert row.roofline_fraction == pytest.approx(2e6 / H100_GBS / 1e-5, rel=1e-9)
    assert row.achieved.unit == "GB/s" and row.achieved.value == pytest.approx(200.0)
    assert model.floor_ms != pytest.approx(row.floor_ms)  # the axis model differs


def test_roofline_unknown_gpu_or_cpu_leaves_none():
    for hw in ("Some Other GPU", "cpu"):
        row = RunResults.from_traces([trace("u1", hardware=hw)], DEF).rows[0]
        assert row.roofline_fraction is None and row.achieved is None and row.floor_ms is None


def test_roofline_unknown_definition_leaves_none():
    row = RunResults.from_traces([trace("u1", definition="toy_axpy")], "toy_axpy").rows[0]
    assert row.roofline_fraction is None and row.floor_ms is None


def test_engine_spread_layout_is_read():
    extra = {"timing_method": "events",
             "spread": {"overall": {"min": 0.8, "p10": 0.9, "median": 1.0, "p90": 1.2, "std": 0.1},
                        "trials": [{"p10": 5.0, "p90": 6.0}]}}
    row = RunResults.from_traces([trace("u1", latency=1.0, perf_extra=extra)], DEF).rows[0]
    assert (row.spread.min_ms, row.spread.p10_ms, row.spread.p90_ms, row.spread.std_ms) == (
        0.8, 0.9, 1.2, 0.1)
    assert row.timing_method == "events"


def test_real_roofline_for_gdn_decode_on_h100():
    row = RunResults.from_traces([trace("u1", latency=0.001, batch=1)], DEF).rows[0]
    # GDN decode, batch 1: state 8*128*128 fp32 read and written (2 * 524288 B), q/k/v/a/b in
    # bf16 (2*(4*128*2 + 8*128) + 2*8*2 = 4128 B), A_log/dt_bias fp32 (64 B), output bf16
    # (2048 B): 1054816 B at the H100 SXM's 3350 GB/s -> 0.31487 us; measured 1 us.
    expected_bytes = 2 * 524288 + 4128 + 64 + 2048
    assert row.floor_ms == pytest.approx(expected_bytes / 3350e9 * 1e3, rel=1e-6)
    assert row.roofline_fraction == pytest.approx(expected_bytes / 3350e9 / 1e-6, rel=1e-6)
    assert row.achieved.unit == "GB/s"
    assert row.achieved.value == pytest.approx(expected_bytes / 1e-6 / 1e9, rel=1e-6)


def test_engine_warnings_are_collected_once():
    t = trace("u1", perf_extra={"timing_warnings": ["CUDA events include launch overhead"]},
              ev_extra={"warnings": ["input 'x' was modified in place",
                                     "CUDA events include launch overhead"]})
    row = RunResults.from_traces([t], DEF).rows[0]
    assert row.warnings == ["input 'x' was modified in place", "CUDA events include launch overhead"]


def test_the_references_timing_note_joins_the_rows_warnings_once():
    """How the reference's latency was timed, where that differs from the judge (the
    profiler's span instead of CUPTI's), reaches the table's notes, not only the trace."""
    note = "the reference was timed with torch's profiler (same span): ..."
    ref = {"timing_method": "profiler", "method_note": note}
    alone = trace("u1", perf_extra={"reference_timing": ref})
    twice = trace("u2", perf_extra={"timing_warnings": [note], "reference_timing": ref})
    plain = trace("u3", perf_extra={"reference_timing": {"timing_method": "cupti"}})
    rows = RunResults.from_traces([alone, twice, plain], DEF).rows
    assert [r.warnings for r in rows] == [[note], [note], []]


def test_the_conditions_of_a_measurement_are_read_from_the_trace():
    """Clocks, the L2's treatment, samples and the roofline's assumed peak: a latency is only
    valid under them, so the report shows them per workload."""
    smi = {"clocks_sm": "1755", "clocks_max_sm": "1980", "clocks_mem": "2619"}
    gpu = trace("g", latency=0.01, batch=4, ev_extra={"clocks": smi, "device": "cuda"},
                perf_extra={"timing_method": "profiler", "iterations": 50, "num_trials": 3})
    (row,) = RunResults.from_traces([gpu], DEF).rows
    assert row.clocks == "SM 1755/1980 MHz, mem 2619 MHz"
    assert row.l2_policy == "flushed before each call" and row.samples == 150
    assert row.floor_peak == "3350 GB/s (H100 SXM)" and row.floor_ms > 0  # memory-bound decode
    told = trace("t", perf_extra={"timing_method": "events", "l2_policy": "warm (not flushed)"})
    assert RunResults.from_traces([told], DEF).rows[0].l2_policy == "warm (not flushed)"
    cpu = trace("c", hardware="CPU (x86_64)", ev_extra={"device": "cpu"},
                perf_extra={"timing_method": "wall-clock"})
    (row,) = RunResults.from_traces([cpu], DEF).rows
    assert (row.l2_policy, row.clocks, row.floor_peak) == ("not flushed (CPU)", None, None)
    again = type(row).from_dict(row.to_dict())  # and they survive a results file
    assert (again.l2_policy, again.clocks) == (row.l2_policy, row.clocks)


def test_busy_time_and_the_launch_bound_hint_reach_the_row_the_file_and_the_table():
    """The span is the judge's latency; beside it, the time the GPU ran the solution's own
    kernels, and the timer's launch-bound hint among the row's warnings."""
    from rich.console import Console

    from fib_core.report.render import render_results

    hint = ("launch-bound: 70% of the span is the GPU waiting between 5 kernels of a call "
            "(the judge counts it); fewer kernels or a CUDA graph would help")
    t = trace("u1", latency=0.2, perf_extra={"busy_ms": 0.06, "timing_method": "cupti",
                                             "timing_warnings": [hint]})
    res = RunResults.from_traces([t], DEF)
    (row,) = res.rows
    assert row.busy_ms == 0.06 and hint in row.warnings
    again = RunResults.from_dict(res.to_dict())
    assert again.rows[0].busy_ms == 0.06
    console = Console(width=200, record=True)
    render_results(res, console=console)
    text = console.export_text()
    header = next(line for line in text.splitlines() if "latency" in line and "busy" in line)
    assert header.index("latency") < header.index("busy")
    assert "60.00 us" in text and "200.0 us" in text, text
