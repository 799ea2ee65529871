"""Tolerance precedence: kit defaults -> op_type -> contest grading -> definition -> explicit config."""

from __future__ import annotations

import pytest

from fib_core.bench import BenchmarkConfig, resolve_tolerance
from fib_core.checking import ToleranceError


def _with(definition, extra=None, **changes):
    """A copy with fields changed and keys the format does not name (``extra``) added."""
    return definition.model_copy(update={**changes, **(extra or {})})


def test_defaults(toy_definition):
    tol = resolve_tolerance(toy_definition, BenchmarkConfig())
    assert (tol.atol, tol.rtol, tol.required_matched_ratio) == (1e-2, 1e-2, 1.0)
    assert set(tol.sources.values()) == {"default"}


def test_op_type_moe_lowers_the_matched_ratio(toy_definition):
    moe = _with(toy_definition, op_type="moe")
    tol = resolve_tolerance(moe, BenchmarkConfig())
    assert tol.required_matched_ratio == 0.95 and tol.sources["required_matched_ratio"] == "op_type"
    assert tol.atol == 1e-2


def test_definition_beats_op_type_and_config_beats_everything(toy_definition):
    moe = _with(toy_definition, op_type="moe",
                extra={"tolerance": {"atol": 1.0, "rtol": 0.3, "required_matched_ratio": 0.9}})
    tol = resolve_tolerance(moe, BenchmarkConfig())
    assert (tol.atol, tol.rtol, tol.required_matched_ratio) == (1.0, 0.3, 0.9)
    assert set(tol.sources.values()) == {"definition"}
    explicit = resolve_tolerance(moe, BenchmarkConfig(rtol=0.05, required_matched_ratio=1.0))
    assert (explicit.atol, explicit.rtol, explicit.required_matched_ratio) == (1.0, 0.05, 1.0)
    assert explicit.sources == {"atol": "definition", "rtol": "config",
                                "required_matched_ratio": "config"}


def test_bad_definition_tolerance_is_a_user_error(toy_definition):
    bad = _with(toy_definition, extra={"tolerance": {"atoll": 1}})
    with pytest.raises(ToleranceError, match="toy_axpy"):
        resolve_tolerance(bad, BenchmarkConfig())


def test_contest_grading_applies_by_name_below_definition_and_config(toy_definition):
    """The MoE contest definition is graded with atol 1, rtol 0.3, 90% matched."""
    moe = _with(toy_definition, op_type="moe",
                name="moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048")
    tol = resolve_tolerance(moe, BenchmarkConfig())
    assert (tol.atol, tol.rtol, tol.required_matched_ratio) == (1.0, 0.3, 0.9)
    assert set(tol.sources.values()) == {"contest"}
    own = _with(moe, extra={"tolerance": {"rtol": 0.2}})
    assert resolve_tolerance(own, BenchmarkConfig()).rtol == 0.2
    assert resolve_tolerance(moe, BenchmarkConfig(atol=0.5)).atol == 0.5
