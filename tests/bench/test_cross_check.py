"""Timer cross-check: the launch-overhead model's verdicts, the CPU note, and (GPU) a real run."""

from __future__ import annotations

import io

import pytest

from fib_core.bench.cross_check import (
    EVENTS_BASE_US,
    GRAPH_BASE_US,
    NEEDS_GPU,
    PER_KERNEL_US,
    CrossCheckRow,
    allowed_excess_us,
    cross_check_shard,
    host_gap_note,
    judge,
)
from fib_core.project.cross_check_table import print_cross_check


def test_agreeing_timers_pass_and_ratios_use_the_span() -> None:
    lat = {"profiler": 0.100, "cupti": 0.101, "events": 0.108, "graph": 0.104}
    ref, flagged, reason = judge(lat, kernels=2)
    assert (ref, flagged, reason) == ("profiler", False, "")
    row = CrossCheckRow("u", {}, lat, reference=ref)
    assert row.ratios()["events"] == pytest.approx(1.08)


def test_a_timer_reading_ten_times_high_on_a_microsecond_kernel_is_flagged() -> None:
    ref, flagged, reason = judge({"profiler": 0.005, "events": 0.050}, kernels=1)
    assert flagged and ref == "profiler"
    assert reason.startswith("events reads 50.0 us, +45.0 us over the profiler span of 5.0 us")


def test_events_get_the_launch_overhead_of_each_kernel() -> None:
    # span 5 us, 3 kernels: events may read up to 5 + 2 (floor) + 8 + 3 * 4 = 27 us
    assert allowed_excess_us("events", 3) == EVENTS_BASE_US + 3 * PER_KERNEL_US
    assert not judge({"profiler": 0.005, "events": 0.0265}, kernels=3)[1]
    assert judge({"profiler": 0.005, "events": 0.0275}, kernels=3)[1]
    # a graph replay has no host launch: only the graph's own allowance (span + 2 us floor + it)
    assert allowed_excess_us("graph", 3) == GRAPH_BASE_US
    edge_ms = (5.0 + 2.0 + GRAPH_BASE_US) / 1e3
    assert not judge({"profiler": 0.005, "graph": edge_ms - 0.0005}, kernels=3)[1]
    assert judge({"profiler": 0.005, "graph": edge_ms + 0.0005}, kernels=3)[1]


def test_host_gaps_let_events_and_graph_read_below_the_span_down_to_the_busy_time() -> None:
    # 120 us span of which the kernels are busy 30 us: the rest is the GPU waiting for the host
    lat = {"profiler": 0.120, "events": 0.100, "graph": 0.029}
    assert judge(lat, kernels=3, busy_ms=0.030) == ("profiler", False, "")
    _, flagged, reason = judge({**lat, "graph": 0.020}, kernels=3, busy_ms=0.030)
    assert flagged and reason == "graph reads 20.0 us, below the kernels' busy time of 30.0 us"
    # without a busy time, events below the span are flagged and the graph has no floor
    _, flagged, reason = judge(lat, kernels=3)
    assert flagged and reason.startswith("events reads 100.0 us, below the profiler span")
    note = host_gap_note(0.120, 0.030, 0.029)
    assert note.startswith("90.0 us of the 120.0 us span is the GPU waiting for the host")
    assert note.endswith("replayed as a CUDA graph the call takes 29.0 us")
    assert host_gap_note(0.120, 0.110, None) == ""  # within 20 %: no note


def test_a_timer_below_the_span_or_two_spans_apart_is_flagged() -> None:
    _, flagged, reason = judge({"profiler": 1.0, "events": 0.8}, kernels=1)
    assert flagged and "below the profiler span" in reason
    _, flagged, reason = judge({"profiler": 1.0, "cupti": 1.2}, kernels=1)
    assert flagged and reason.startswith("cupti reads")
    ref, flagged, _ = judge({"cupti": 1.0, "events": 1.05}, kernels=1)
    assert ref == "cupti" and not flagged
    assert judge({"events": 1.0}, kernels=1)[0] is None


def test_busy_time_per_call_comes_from_a_gpu_only_profiler_session(monkeypatch) -> None:
    """profile_call opens a kineto session of the GPU's activity only and averages what its
    events record per call; a session that fails gives (None, None), not an error."""
    from types import SimpleNamespace

    import torch

    from fib_core.bench import cross_check

    opened = []

    class Session:
        def __init__(self, **kwargs) -> None:
            opened.append(kwargs)

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            return None

        @property
        def function_events(self):
            kernel = SimpleNamespace(device_type="DeviceType.CUDA",
                                     time_range=SimpleNamespace(elapsed_us=lambda: 5.0))
            host = SimpleNamespace(device_type="DeviceType.CPU",
                                   time_range=SimpleNamespace(elapsed_us=lambda: 99.0))
            return [kernel, kernel, host] * 3

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.autograd.profiler, "profile", Session)
    calls = []
    assert cross_check.profile_call(calls.append, repeats=3) == (2, pytest.approx(0.010))
    assert calls == [0, 0, 0]
    assert opened == [{"use_device": "cuda", "use_cpu": False, "use_kineto": True}]

    def broken(**kwargs):
        raise RuntimeError("no activities")

    monkeypatch.setattr(torch.autograd.profiler, "profile", broken)
    assert cross_check.profile_call(calls.append) == (None, None)


def test_rows_validate_and_round_trip() -> None:
    with pytest.raises(ValueError, match="unknown method"):
        CrossCheckRow("u", {}, {"stopwatch": 1.0})
    with pytest.raises(ValueError, match="expected > 0"):
        CrossCheckRow("u", {}, {"events": 0.0})
    row = CrossCheckRow(
        "u", {"b": 1}, {"profiler": 1.0}, {"cupti": "missing"}, 3, "profiler", busy_ms=0.5, note="n"
    )
    assert CrossCheckRow.from_dict(row.to_dict()) == row


def test_on_cpu_it_says_it_needs_a_gpu() -> None:
    from rich.console import Console

    rows, notes = cross_check_shard(None, [], "cpu", "unused")
    assert rows == [] and notes == [NEEDS_GPU]
    out = io.StringIO()
    print_cross_check(rows, notes, Console(file=out, width=200))
    assert "needs a CUDA GPU" in out.getvalue()


def test_printed_table_shows_ratios_and_the_reason() -> None:
    from rich.console import Console

    lat = {"profiler": 0.005, "events": 0.050}
    ref, flagged, reason = judge(lat, 1)
    row = CrossCheckRow(
        "abcdef123456", {"b": 1}, lat, {"graph": "capture failed"}, 1, ref, flagged, reason
    )
    out = io.StringIO()
    print_cross_check([row.to_dict()], [], Console(file=out, width=200))
    text = out.getvalue()
    assert "50.00 us (10.00x)" in text and "DISAGREE" in text and "abcdef12" in text
    assert "graph: capture failed" in text


@pytest.mark.gpu
def test_cross_check_of_the_default_starter_on_a_gpu(repo_root) -> None:
    from fib_core.data import TraceSet
    from fib_core.dataset import default_dataset_path
    from fib_core.project.runflow import RunOptions, make_request
    from fib_core.project.workspace import open_workspace

    ws = open_workspace(repo_root / "config.toml")
    request = make_request(ws.cfg, ws.pack(), RunOptions(cross_check=True))
    path = default_dataset_path()
    workloads = TraceSet.from_path(path).workloads[request.definition][:2]
    rows, notes = cross_check_shard(request, workloads, "cuda", path)
    assert notes == [] and len(rows) == 2
    for d in rows:
        row = CrossCheckRow.from_dict(d)
        assert row.reference == "profiler"
        assert {"profiler", "events"} <= set(row.latencies_ms)
        assert row.kernels and row.kernels >= 1
        assert row.busy_ms and row.busy_ms <= row.latencies_ms["profiler"] * 1.1
