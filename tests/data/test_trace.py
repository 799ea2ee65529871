"""Workload and Trace records: input kinds, nullability per status, non-finite numbers."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from fib_core.data import (
    Correctness,
    Environment,
    Evaluation,
    EvaluationStatus,
    Performance,
    RandomInput,
    SafetensorsInput,
    ScalarInput,
    Trace,
    Workload,
)
from fib_core.errors import SchemaError


def test_workload_inputs_and_tags(build):
    raw = build.workload()
    wl = Workload.from_dict(raw)
    assert isinstance(wl.inputs["x"], RandomInput)
    assert wl.inputs["table"] == SafetensorsInput("./blob/t.safetensors", "t")
    assert wl.inputs["scale"] == ScalarInput(0.5)
    assert wl.tags == []
    raw["tags"] = ["quick"]
    tagged = Workload.from_dict(raw)
    assert tagged.tags == ["quick"] and tagged.to_dict() == raw
    raw["tags"] = "quick"
    with pytest.raises(SchemaError, match="^tags: found 'quick'"):
        Workload.from_dict(raw)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda r: r["inputs"]["x"].update(type="zeros"), "inputs.x.type: found 'zeros'"),
        (lambda r: r["inputs"]["scale"].pop("value"), "inputs.scale: missing the required key 'value'"),
        (lambda r: r["inputs"]["scale"].update(value="0.5"), "inputs.scale.value: found '0.5'"),
        (lambda r: r["inputs"]["table"].update(path=""), "inputs.table.path: found ''"),
        (lambda r: r["axes"].update(tokens=-3), "axes.tokens: found -3, expected an integer >= 0"),
        (lambda r: r["axes"].update(tokens=2.5), "axes.tokens: found 2.5, expected an integer"),
        (lambda r: r.pop("uuid"), "missing the required key 'uuid'"),
    ],
)
def test_malformed_workloads(build, mutate, expected):
    raw = build.workload()
    mutate(raw)
    with pytest.raises(SchemaError) as info:
        Workload.from_dict(raw)
    assert str(info.value).startswith(expected)


def test_workload_record_round_trip(build):
    raw = build.trace(solution=None)
    trace = Trace.from_dict(raw)
    assert trace.is_workload_trace() and not trace.is_successful()
    assert trace.to_dict() == raw and list(trace.to_dict()) == list(raw)


@pytest.mark.parametrize("status", [s.value for s in EvaluationStatus])
def test_each_status_round_trips(build, status):
    raw = build.trace(status=status)
    trace = Trace.from_dict(raw)
    assert trace.evaluation.status is EvaluationStatus(status)
    assert trace.is_successful() == (status == "PASSED")
    assert trace.to_dict() == raw


@pytest.mark.parametrize(
    ("status", "field", "value", "expected"),
    [
        ("PASSED", "correctness", None, "correctness: found null, expected an object when"),
        ("PASSED", "performance", None, "performance: found null, expected an object when"),
        ("INCORRECT_NUMERICAL", "correctness", None, "correctness: found null, expected an obj"),
        ("INCORRECT_NUMERICAL", "performance", {"latency_ms": 1, "reference_latency_ms": 1,
                                                "speedup_factor": 1},
         "performance: found 'Performance', expected null when status is INCORRECT_NUMERICAL"),
        ("TIMEOUT", "correctness", {"max_relative_error": 0, "max_absolute_error": 0},
         "correctness: found 'Correctness', expected null when status is TIMEOUT"),
    ],
)
def test_nullability_rules(build, status, field, value, expected):
    raw = build.trace(status=status)
    raw["evaluation"][field] = value
    with pytest.raises(SchemaError) as info:
        Trace.from_dict(raw)
    assert str(info.value).startswith("evaluation." + expected)


def test_unknown_status_is_listed(build):
    raw = build.trace()
    raw["evaluation"]["status"] = "OK"
    with pytest.raises(SchemaError, match=r"^evaluation\.status: found 'OK', expected one of "
                                          r"'PASSED', .* or 'TIMEOUT'$"):
        Trace.from_dict(raw)


def test_non_finite_errors_read_both_forms_and_write_strings(build):
    raw = build.trace(status="INCORRECT_NUMERICAL", rel="Infinity", abs_=float("nan"))
    trace = Trace.from_dict(raw)
    corr = trace.evaluation.correctness
    assert corr.max_relative_error == math.inf and math.isnan(corr.max_absolute_error)
    out = trace.to_dict()["evaluation"]["correctness"]
    assert out == {"max_relative_error": "Infinity", "max_absolute_error": "NaN"}
    # Strict JSON writers accept the result: no bare Infinity/NaN tokens.
    json.dumps(trace.to_dict(), allow_nan=False)
    raw = build.trace(status="INCORRECT_NUMERICAL", rel=float("inf"), abs_="NaN")
    assert Trace.from_dict(raw).to_dict()["evaluation"]["correctness"]["max_relative_error"] == (
        "Infinity")


@pytest.mark.parametrize("value", [-1.0, "-Infinity", "inf", None, True])
def test_bad_error_values(build, value):
    raw = build.trace(status="INCORRECT_NUMERICAL", rel=value)
    with pytest.raises(SchemaError, match=r"^evaluation\.correctness\.max_relative_error: found"):
        Trace.from_dict(raw)


def test_extras_are_kept_where_the_kit_writes_them(build):
    raw = build.trace()
    raw["evaluation"]["performance"]["latency_p10_ms"] = 0.9
    raw["evaluation"]["correctness"]["extra"] = {"matched_ratio": 0.99}
    raw["evaluation"]["seed"] = 7
    raw["evaluation"]["environment"]["gpu_clock_mhz"] = 1965
    raw["comment"] = "rerun"
    trace = Trace.from_dict(raw)
    assert trace.evaluation.performance.extra == {"latency_p10_ms": 0.9}
    assert trace.evaluation.correctness.extra == {"matched_ratio": 0.99}
    assert trace.evaluation.extra == {"seed": 7}
    assert trace.to_dict() == raw


def test_constructed_trace_serialises_in_format_order():
    ev = Evaluation(
        status=EvaluationStatus.PASSED, log="", environment=Environment("H100"),
        timestamp="t", correctness=Correctness(0.0, 0.0), performance=Performance(1, 2, 2),
    )
    trace = Trace("d", Workload("u", {}, {}), "s", ev)
    out = trace.to_dict()
    assert list(out) == ["definition", "solution", "workload", "evaluation"]
    assert list(out["evaluation"]) == ["status", "log", "correctness", "performance",
                                       "environment", "timestamp"]
    assert Trace.from_dict(json.loads(json.dumps(out))) == trace
    with pytest.raises(ValidationError, match="Input should be 'PASSED'"):
        Evaluation("GOOD", "", Environment("H100"), "t")
    with pytest.raises(SchemaError, match="^status: found 'GOOD'"):
        Evaluation.from_dict({**ev.to_dict(), "status": "GOOD"})
