"""Files move both ways between the kit and the organizers' ``flashinfer-bench`` package.

Runs where that package is installed. Its file-format layer needs only pydantic and
docstring-parser (in the ``dev`` extra), so CI installs it without its heavy dependencies
(flashinfer-python, CUDA wheels): ``pip install --no-deps -r requirements-compat.txt``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

fib = pytest.importorskip("flashinfer_bench.data")

from fib_core.data import (  # noqa: E402 - after the skip on purpose
    Definition,
    Solution,
    Trace,
    TraceSet,
)


def _our_dataset(root: Path, build, def_name: str) -> TraceSet:
    ts = TraceSet(root=root)
    ts.add_definition(Definition.from_dict(build.definition()))
    ts.add_solution(Solution.from_dict(build.solution("sol-a", "alice")))
    ts.add_solution(Solution.from_dict(build.solution("sol-b", "bob", binding="torch",
                                                      destination_passing_style=False)))
    workload = build.trace(solution=None)
    workload["workload"]["tags"] = ["quick"]  # our extension: ignored there
    ts.add_workload_traces([Trace.from_dict(workload)])
    passed = build.trace("sol-a")
    passed["evaluation"]["performance"]["latency_p50_ms"] = 1.0  # our extension
    ts.add_traces([
        Trace.from_dict(passed),
        Trace.from_dict(build.trace("sol-b", status="INCORRECT_NUMERICAL", rel="Infinity",
                                    abs_="NaN")),
        Trace.from_dict(build.trace("sol-b", status="TIMEOUT")),
    ])
    return ts


def test_dataset_written_by_the_kit_loads_there(tmp_path, build, def_name):
    _our_dataset(tmp_path, build, def_name)
    theirs = fib.TraceSet.from_path(str(tmp_path))
    assert list(theirs.definitions) == [def_name]
    d = theirs.definitions[def_name]
    assert [a for a in d.axes] == ["tokens", "pages", "hidden"]
    assert theirs.get_solution("sol-b").spec.destination_passing_style is False
    assert theirs.get_solution("sol-b").spec.binding.value == "torch"
    assert theirs.workloads[def_name][0].workload.uuid == "w-1"
    by_status = {t.evaluation.status.value: t for t in theirs.traces[def_name]}
    assert set(by_status) == {"PASSED", "INCORRECT_NUMERICAL", "TIMEOUT"}
    corr = by_status["INCORRECT_NUMERICAL"].evaluation.correctness
    assert math.isinf(corr.max_relative_error) and math.isnan(corr.max_absolute_error)
    assert by_status["PASSED"].evaluation.performance.latency_ms == 1.0


def test_files_written_there_load_here(tmp_path, build, def_name):
    definition = fib.Definition.model_validate(build.definition())
    solution = fib.Solution.model_validate(build.solution("sol-x", "xavier"))
    theirs = fib.TraceSet(root=tmp_path, definitions={def_name: definition})
    fib.save_json_file(definition, tmp_path / "definitions" / "toy" / f"{def_name}.json")
    fib.save_json_file(solution, tmp_path / "solutions" / "sol-x.json")
    theirs.add_workload_traces([fib.Trace.model_validate(build.trace(solution=None))])
    numerical = build.trace("sol-x", status="INCORRECT_NUMERICAL", rel=float("inf"),
                            abs_=float("nan"))
    theirs.add_traces([fib.Trace.model_validate(build.trace("sol-x", latency=0.25)),
                       fib.Trace.model_validate(numerical)])  # the 0.1.x traces layout

    ours = TraceSet.from_path(tmp_path)
    expected = build.definition()
    if not hasattr(fib.TensorSpec, "optional") and "optional" not in fib.TensorSpec.model_fields:
        del expected["inputs"]["table"]["optional"]  # 0.1.2 has no such field and drops it
    assert ours.definitions[def_name].to_dict() == expected
    assert ours.get_solution("sol-x").spec.entry_point == "kernel/main.py::run"
    assert [w.workload.uuid for w in ours.workloads[def_name]] == ["w-1"]
    traces = {t.evaluation.status.value: t for t in ours.traces[def_name]}
    assert traces["PASSED"].evaluation.performance.latency_ms == 0.25
    corr = traces["INCORRECT_NUMERICAL"].evaluation.correctness
    assert math.isinf(corr.max_relative_error) and math.isnan(corr.max_absolute_error)


def test_contest_definitions_reserialised_by_the_kit_load_there(shared_dir, tmp_path):
    for path in sorted((shared_dir / "mlsys26" / "definitions").rglob("*.json")):
        ours = Definition.from_dict(json.loads(path.read_text()))
        theirs = fib.Definition.model_validate_json(json.dumps(ours.to_dict()))
        assert theirs.name == ours.name and list(theirs.inputs) == ours.input_names
