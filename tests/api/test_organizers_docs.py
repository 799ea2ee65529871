"""The organizers' documented data usage, run against ``fib_core`` with only the package renamed.

Their README imports the package and points to the quickstart; the quickstart loads a dataset
with ``TraceSet.from_path`` and reads the best trace's solution and speedup; their API pages say
every schema is a pydantic model, so scripts call ``model_validate``, ``model_validate_json``,
``model_dump``, ``model_dump_json``, ``model_copy`` and ``model_json_schema`` on them and catch a
bad value as a ``ValueError``. The records below follow the shapes of their schema pages
(definition, solution, workload, trace), written here for a small RMSNorm. The scoring snippet of
their evaluation guide runs in ``tests/data/test_scoring.py``.
"""

from __future__ import annotations

import json
import math

import pytest
from pydantic import BaseModel, ValidationError

import fib_core as fib
from fib_core.data import (
    Correctness,
    Definition,
    Evaluation,
    EvaluationStatus,
    Solution,
    Trace,
    TraceSet,
    load_json_file,
    load_jsonl_file,
    save_json_file,
    save_jsonl_file,
)

RMSNORM = {
    "name": "rmsnorm_h64",
    "op_type": "rmsnorm",
    "description": "Root-mean-square normalisation over the hidden axis.",
    "axes": {
        "batch_size": {"type": "var"},
        "hidden_size": {"type": "const", "value": 64},
    },
    "inputs": {
        "input": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"},
        "weight": {"shape": ["hidden_size"], "dtype": "bfloat16"},
        "eps": {"shape": None, "dtype": "float32"},
    },
    "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"}},
    "reference": (
        "import torch\n\n"
        "def run(input, weight, eps):\n"
        "    x = input.float()\n"
        "    scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)\n"
        "    return (x * scale * weight.float()).to(input.dtype)\n"
    ),
}

SOLUTION = {
    "name": "rmsnorm_triton_v1",
    "definition": "rmsnorm_h64",
    "author": "team-a",
    "spec": {
        "language": "triton",
        "target_hardware": ["NVIDIA_B200"],
        "entry_point": "main.py::run",
    },
    "sources": [{"path": "main.py", "content": "def run(input, weight, eps, output):\n    ...\n"}],
}


def _workload(uuid: str, batch: int) -> dict:
    return {
        "uuid": uuid,
        "axes": {"batch_size": batch},
        "inputs": {"input": {"type": "random"}, "weight": {"type": "random"},
                   "eps": {"type": "scalar", "value": 1e-6}},
    }


def _trace(solution: str, uuid: str, batch: int, latency: float, reference: float) -> dict:
    return {
        "definition": "rmsnorm_h64",
        "solution": solution,
        "workload": _workload(uuid, batch),
        "evaluation": {
            "status": "PASSED",
            "log": "",
            "correctness": {"max_relative_error": 1e-3, "max_absolute_error": 2e-4},
            "performance": {"latency_ms": latency, "reference_latency_ms": reference,
                            "speedup_factor": reference / latency},
            "environment": {"hardware": "NVIDIA_B200", "libs": {"torch": "2.9.0"}},
            "timestamp": "2026-03-01T12:00:00Z",
        },
    }


def test_readme_import():
    assert isinstance(fib.__version__, str) and fib.__version__


def test_every_schema_class_is_a_pydantic_model():
    for cls in (Definition, Solution, Trace, Evaluation, Correctness):
        assert issubclass(cls, BaseModel)


def test_schema_records_validate_dump_and_copy():
    definition = Definition.model_validate(RMSNORM)
    assert definition.var_axes == ["batch_size"] and definition.const_axes == {"hidden_size": 64}
    assert definition.get_input_shapes({"batch_size": 8}) == {
        "input": [8, 64], "weight": [64], "eps": None}

    solution = Solution.model_validate_json(json.dumps(SOLUTION))
    assert solution.spec.language == "triton" and solution.get_entry_symbol() == "run"
    assert solution.spec.destination_passing_style is True  # the documented default
    renamed = solution.model_copy(update={"author": "team-b"})
    assert renamed.author == "team-b" and solution.author == "team-a"
    assert renamed.hash() == solution.hash()  # the author is not part of what gets built

    trace = Trace.model_validate(_trace("rmsnorm_triton_v1", "w-1", 32, 0.01, 0.04))
    assert trace.is_successful() and trace.evaluation.status is EvaluationStatus.PASSED
    assert trace.evaluation.performance.speedup_factor == pytest.approx(4.0)
    dumped = trace.model_dump()
    assert dumped["evaluation"]["status"] == "PASSED" and dumped["workload"]["uuid"] == "w-1"
    assert Trace.model_validate(dumped) == trace
    assert Trace.model_validate_json(trace.model_dump_json()) == trace

    workload_record = Trace.model_validate(
        {"definition": "rmsnorm_h64", "solution": None, "workload": _workload("w-2", 1),
         "evaluation": None})
    assert workload_record.is_workload_trace() and not workload_record.is_successful()


def test_non_finite_numbers_are_strings_in_json():
    raw = _trace("rmsnorm_triton_v1", "w-1", 32, 0.01, 0.04)
    raw["evaluation"].update(status="INCORRECT_NUMERICAL", performance=None)
    raw["evaluation"]["correctness"] = {"max_relative_error": "Infinity",
                                        "max_absolute_error": "NaN"}
    trace = Trace.model_validate_json(json.dumps(raw))
    corr = trace.evaluation.correctness
    assert math.isinf(corr.max_relative_error) and math.isnan(corr.max_absolute_error)
    text = trace.model_dump_json()
    assert '"max_relative_error":"Infinity"' in text and '"max_absolute_error":"NaN"' in text
    json.loads(text, parse_constant=pytest.fail)  # standard JSON: no bare NaN/Infinity


def test_json_schema_describes_the_fields():
    schema = Solution.model_json_schema()
    assert {"name", "definition", "author", "spec", "sources"} <= set(schema["required"])
    spec = schema["$defs"]["BuildSpec"]["properties"]
    assert spec["destination_passing_style"]["default"] is True
    assert "entry_point" in schema["$defs"]["BuildSpec"]["required"]
    assert Definition.model_json_schema()["properties"]["reference"]["description"]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["inputs"]["input"].update(dtype="fp16"), ("inputs", "input", "dtype")),
        (lambda d: d.pop("reference"), ("reference",)),
        (lambda d: d["axes"]["hidden_size"].update(value=-4), ("axes", "hidden_size")),
    ],
)
def test_a_bad_value_is_a_value_error_naming_the_field(mutate, field):
    raw = json.loads(json.dumps(RMSNORM))
    mutate(raw)
    with pytest.raises(ValueError) as info:
        Definition.model_validate(raw)
    assert isinstance(info.value, ValidationError)
    assert tuple(info.value.errors()[0]["loc"][: len(field)]) == field


def test_reference_without_run_is_refused():
    raw = {**RMSNORM, "reference": "def forward(input, weight, eps):\n    return input\n"}
    with pytest.raises(ValueError, match="top-level function named 'run'"):
        Definition.model_validate(raw)


def test_quickstart_best_trace(tmp_path, capsys):
    # A dataset written with the documented file helpers, then the quickstart's lines.
    save_json_file(Definition.model_validate(RMSNORM),
                   tmp_path / "definitions" / "rmsnorm" / "rmsnorm_h64.json")
    fast = Solution.model_validate(SOLUTION)
    slow = fast.model_copy(update={"name": "rmsnorm_python", "author": "team-b"})
    for sol in (fast, slow):
        save_json_file(sol, tmp_path / "solutions" / sol.author / f"{sol.name}.json")
    save_jsonl_file(
        [Trace.model_validate({"definition": "rmsnorm_h64", "workload": _workload("w-1", 32)})],
        tmp_path / "workloads" / "rmsnorm" / "rmsnorm_h64.jsonl")
    save_jsonl_file(
        [Trace.model_validate(_trace("rmsnorm_triton_v1", "w-1", 32, 0.01, 0.04)),
         Trace.model_validate(_trace("rmsnorm_python", "w-1", 32, 0.05, 0.04))],
        tmp_path / "traces" / "rmsnorm" / "rmsnorm_h64.jsonl")

    trace_set = TraceSet.from_path(str(tmp_path))
    best_trace = trace_set.get_best_trace("rmsnorm_h64")
    if best_trace:
        print(f"Best solution: {best_trace.solution}")
        print(f"Speedup: {best_trace.evaluation.performance.speedup_factor:.2f}×")
    assert capsys.readouterr().out.splitlines() == [
        "Best solution: rmsnorm_triton_v1", "Speedup: 4.00×"]

    # Both releases' argument orders of the file loaders.
    path = tmp_path / "definitions" / "rmsnorm" / "rmsnorm_h64.json"
    assert load_json_file(Definition, path) == load_json_file(path, Definition)
    traces = load_jsonl_file(Trace, tmp_path / "traces" / "rmsnorm" / "rmsnorm_h64.jsonl")
    assert [t.solution for t in traces] == ["rmsnorm_triton_v1", "rmsnorm_python"]


def test_older_spellings_still_load():
    """Records and scripts of the 0.1 era: ``log_file``, ``build_commands``, defaulted errors."""
    raw = _trace("rmsnorm_triton_v1", "w-1", 32, 0.01, 0.04)
    raw["evaluation"]["log_file"] = "/tmp/logs/w-1.log"
    trace = Trace.model_validate(raw)
    assert trace.evaluation.log_file == "/tmp/logs/w-1.log"
    assert trace.to_dict() == raw
    assert Trace.model_validate(_trace("s", "w", 1, 1.0, 1.0)).evaluation.log_file is None
    assert "log_file" not in Trace.model_validate(_trace("s", "w", 1, 1.0, 1.0)).model_dump()[
        "evaluation"]

    spec = {**SOLUTION["spec"], "build_commands": ["make -j"]}
    solution = Solution.model_validate({**SOLUTION, "spec": spec})
    assert solution.spec.build_commands == ["make -j"]

    assert Correctness() == Correctness(max_relative_error=0.0, max_absolute_error=0.0)
    assert Correctness().extra is None
