"""compare(): per-workload change and whether it is outside the noise band."""

from __future__ import annotations

import pytest

from fib_core.report.compare import comparability_warning, compare


def test_change_and_noise_rule(mkrow, mkrun, spread):
    prev = mkrun([
        mkrow("fast", latency=1.00, spread=spread(0.99, 1.01)),
        mkrow("noisy", latency=1.00, spread=spread(0.90, 1.10)),   # 20 % band
        mkrow("same", latency=1.00),
        mkrow("slow", latency=1.00),
        mkrow("gone", latency=1.00),
    ])
    cur = mkrun([
        mkrow("fast", latency=0.80, spread=spread(0.79, 0.81)),    # -20 %, bands ~2.5 % -> floor 3 %
        mkrow("noisy", latency=0.85),                             # -15 % inside the 20 % band
        mkrow("same", latency=1.02),                              # +2 % inside the 3 % floor
        mkrow("slow", latency=1.10),                              # +10 %
        mkrow("new", latency=1.0),
    ])
    d = {x.uuid: x for x in compare(cur, prev)}
    assert [x.uuid for x in compare(cur, prev)] == ["fast", "noisy", "same", "slow", "new", "gone"]
    assert d["fast"].change_pct == pytest.approx(-20.0)
    assert d["fast"].noise_pct == pytest.approx(3.0)
    assert d["fast"].outside_noise and d["fast"].verdict == "faster"
    assert d["noisy"].noise_pct == pytest.approx(20.0)
    assert not d["noisy"].outside_noise and d["noisy"].verdict == "within noise"
    assert d["same"].verdict == "within noise"
    assert d["slow"].verdict == "slower" and d["slow"].change_pct == pytest.approx(10.0)
    assert d["new"].verdict == "new" and d["new"].change_pct is None
    assert d["gone"].verdict == "missing" and d["gone"].previous_ms == 1.0


def test_status_changes(mkrow, mkrun):
    prev = mkrun([mkrow("a"), mkrow("b", "TIMEOUT"), mkrow("c", "RUNTIME_ERROR")])
    cur = mkrun([mkrow("a", "INCORRECT_NUMERICAL"), mkrow("b"), mkrow("c", "TIMEOUT")])
    verdicts = [x.verdict for x in compare(cur, prev)]
    assert verdicts == ["now failing", "now passing", "still failing"]
    assert not any(x.outside_noise for x in compare(cur, prev))


def test_floor_is_configurable(mkrow, mkrun):
    prev, cur = mkrun([mkrow("a", latency=1.0)]), mkrun([mkrow("a", latency=1.02)])
    assert compare(cur, prev, floor_pct=1.0)[0].verdict == "slower"
    with pytest.raises(ValueError):
        compare(cur, prev, floor_pct=-1)


def test_comparability_warning(mkrun):
    assert comparability_warning(mkrun([]), mkrun([])) is None
    assert "different GPUs" in comparability_warning(mkrun([]), mkrun([], gpu_name="NVIDIA B200"))
    assert "cpu" in comparability_warning(mkrun([]), mkrun([], device="cpu", gpu_name=None))
    assert "not" in comparability_warning(mkrun([]), mkrun([], definition="other_def"))
