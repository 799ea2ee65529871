"""BenchmarkConfig: organizers' defaults, validation with one-line messages, overrides."""

from __future__ import annotations

import pytest

from fib_core.bench import BenchmarkConfig
from fib_core.errors import ConfigError, FibError


def test_defaults_are_the_organizers():
    cfg = BenchmarkConfig()
    assert (cfg.warmup_runs, cfg.iterations, cfg.num_trials) == (10, 50, 3)
    assert cfg.timeout_seconds == 300
    assert cfg.atol is None and cfg.rtol is None and cfg.required_matched_ratio is None
    assert cfg.isolated is False and cfg.device == "auto"


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("iterations", 0, "iterations = 0"),
        ("warmup_runs", -1, "warmup_runs = -1"),
        ("atol", -0.1, "atol = -0.1"),
        ("required_matched_ratio", 1.5, "required_matched_ratio = 1.5"),
        ("device", "tpu", "device = 'tpu'"),
        ("timing_method", "stopwatch", "timing_method = 'stopwatch'"),
        ("timeout_seconds", 0, "timeout_seconds = 0"),
        ("solutions", "one_name", "solutions = 'one_name'"),
    ],
)
def test_bad_values_raise_a_one_line_config_error(field, value, needle):
    with pytest.raises(ConfigError) as info:
        BenchmarkConfig(**{field: value})
    assert isinstance(info.value, FibError)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_with_overrides_applies_only_values_that_were_set():
    cfg = BenchmarkConfig(iterations=7, atol=0.5)
    new = cfg.with_overrides(iterations=None, atol=None, rtol=0.2, solutions=["a"])
    assert new.iterations == 7 and new.atol == 0.5 and new.rtol == 0.2
    assert new.solutions == ("a",)
    with pytest.raises(ConfigError, match="unknown field 'iteration'"):
        cfg.with_overrides(iteration=3)


def test_workload_filter_matches_uuid_or_long_prefix():
    cfg = BenchmarkConfig(workloads=["abcdef12", "xyz"])
    assert cfg.matches_workload("abcdef12-3456")
    assert cfg.matches_workload("xyz")
    assert not cfg.matches_workload("xyz-other")  # prefixes shorter than 6 must match exactly
    assert BenchmarkConfig().matches_workload("anything")
