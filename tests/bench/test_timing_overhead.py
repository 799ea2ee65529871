"""Timing overhead cut without changing what is measured: raw profiler records, one session.

CPU: the raw-record reader feeds the same span selection as the profiler's event list, and
falls back to that list when the raw records lack a span. GPU: one session for all trials and
one session per trial time the same kernel alike, with no fallback.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fib_core.bench import timing


class _RawEvent:
    """Shaped like torch's raw profiler record (methods, not attributes)."""

    def __init__(self, name: str, device: str, duration_ns: int) -> None:
        self._name, self._device, self._ns = name, device, duration_ns

    def name(self) -> str:
        return self._name

    def device_type(self) -> str:
        return f"DeviceType.{self._device}"

    def duration_ns(self) -> int:
        return self._ns


def _prof(raw: list[_RawEvent], listed: list | None = None) -> SimpleNamespace:
    def events():
        if listed is None:
            raise AssertionError("the event list was built although the raw records sufficed")
        return listed

    results = SimpleNamespace(events=lambda: raw)
    return SimpleNamespace(profiler=SimpleNamespace(kineto_results=results), events=events)


def test_raw_records_give_the_gpu_span_of_each_call() -> None:
    raw = [
        _RawEvent("fib_timed_call_5", "CPU", 90_000),  # host range: ignored
        _RawEvent("aten::add_", "CUDA", 1_000),
        _RawEvent("fib_timed_call_5", "CUDA", 12_500),
        _RawEvent("fib_timed_call_6", "CUDA", 7_000),
    ]
    spans, note = timing._spans_or_events(_prof(raw), None, None, 5, 2, None)
    assert spans == [0.0125, 0.007] and note is None


def test_missing_raw_span_falls_back_to_the_event_list() -> None:
    raw = [_RawEvent("fib_timed_call_0", "CUDA", 3_000)]  # call 1 has no raw span
    listed = [
        SimpleNamespace(
            name=f"fib_timed_call_{i}",
            device_type="DeviceType.CUDA",
            time_range=SimpleNamespace(elapsed_us=lambda us=us: us),
        )
        for i, us in ((0, 3.0), (1, 4.0))
    ]
    spans, note = timing._spans_or_events(_prof(raw, listed), None, None, 0, 2, None)
    assert spans == [0.003, 0.004] and note is None


def test_no_raw_records_in_this_torch_uses_the_event_list() -> None:
    listed = [
        SimpleNamespace(
            name="fib_timed_call_0",
            device_type="DeviceType.CUDA",
            time_range=SimpleNamespace(elapsed_us=lambda: 2.0),
        )
    ]
    prof = SimpleNamespace(profiler=SimpleNamespace(), events=lambda: listed)
    assert timing._raw_marks(prof) is None
    assert timing._spans_or_events(prof, None, None, 0, 1, None) == ([0.002], None)


@pytest.mark.gpu
def test_one_session_and_per_trial_sessions_measure_alike() -> None:
    import torch

    x = torch.randn(1 << 22, device="cuda")
    y = torch.empty_like(x)
    checked: list[int] = []

    def call(i: int) -> None:
        torch.mul(x, 2.0, out=y)

    def run(one: bool):
        return timing.measure(
            call,
            lambda i: None,
            device="cuda:0",
            method="profiler",
            warmup=5,
            iterations=30,
            trials=3,
            one_session=one,
            after_trial=lambda t, last: checked.append(last),
        )

    per_trial, one = run(False), run(True)
    assert one.method == per_trial.method == "profiler" and not one.warnings
    assert checked == [34, 64, 94] * 2  # re-checks still run after each trial
    band = max(per_trial.overall["p90"] - per_trial.overall["p10"], 0.05 * per_trial.latency_ms)
    assert abs(one.latency_ms - per_trial.latency_ms) <= band
