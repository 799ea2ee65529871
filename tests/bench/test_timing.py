"""Timing protocol: warmup, trials of iterations, median per trial, spread, method choice."""

from __future__ import annotations

import time

import pytest

from fib_core.bench.evaluation.timer_methods import EVENTS_WARNING
from fib_core.bench.evaluation.timers import choose_method, measure, spread


def test_spread_statistics():
    s = spread([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s["min"], s["median"], s["max"], s["n"]) == (1.0, 3.0, 5.0, 5)
    assert s["p10"] == pytest.approx(1.4) and s["p90"] == pytest.approx(4.6)
    assert s["std"] == pytest.approx(2 ** 0.5)
    assert spread([]) == {}


def test_measure_follows_the_protocol_and_rechecks_after_each_trial():
    calls, prepared, rechecks = [], [], []

    def call(i):
        calls.append(i)
        time.sleep(0.002 if i % 2 else 0.001)

    result = measure(call, prepared.append, device="cpu", method="wall-clock", warmup=3,
                     iterations=4, trials=2, after_trial=lambda t, last: rechecks.append((t, last)))
    # each trial: its warm-up on the trial's first timed index, then the timed calls
    assert calls == [3] * 3 + [3, 4, 5, 6] + [7] * 3 + [7, 8, 9, 10]
    assert prepared == calls  # prepare before every call
    assert rechecks == [(0, 6), (1, 10)]
    assert len(result.trials) == 2 and result.overall["n"] == 8
    expected = sum(t["median"] for t in result.trials) / 2
    assert result.latency_ms == pytest.approx(expected)
    assert 1.0 <= result.latency_ms < 50
    extra = result.to_extra()
    assert extra["timing"] == "wall-clock, not comparable" and extra["timing_method"] == "wall-clock"


def test_method_choice():
    assert choose_method("auto", "cpu") == ("wall-clock", [])
    method, notes = choose_method("events", "cpu")
    assert method == "wall-clock" and "not available" in notes[0]
    assert choose_method("auto", "cuda")[0] in ("cupti", "profiler")
    assert "launch overhead" in EVENTS_WARNING
