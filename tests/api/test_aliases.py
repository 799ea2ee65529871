"""The organizers' spellings give the same results as the kit's own functions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import fib_core
import fib_core as fib
from fib_core import data
from fib_core.compile import BuildError, Runnable, build, get_registry
from fib_core.compile.builder import create_pkg_name, write_sources_to_dir, write_sources_to_temp
from fib_core.compile.builders import CUDABuilder, PythonBuilder, TritonBuilder
from fib_core.compile.registry import BuilderRegistry
from fib_core.data import Definition, Solution, Trace, TraceSet


@pytest.fixture
def ts(tiny_root: Path) -> TraceSet:
    return TraceSet.from_path(tiny_root)


@pytest.fixture
def definition(ts: TraceSet) -> Definition:
    return ts.definitions["tiny_scaled_add"]


def _inputs(rows: int = 8) -> dict:
    gen = torch.Generator().manual_seed(0)
    return {
        "x": torch.randn(rows, 64, generator=gen),
        "y": torch.randn(rows, 64, generator=gen),
        "alpha": 0.75,
    }


# --- data ------------------------------------------------------------------------------------


def test_json_file_helpers_match_the_kit_readers_and_writers(tiny_root: Path, tmp_path: Path):
    def_file = next((tiny_root / "definitions").rglob("*.json"))
    assert data.load_json_file(def_file, Definition) == data.load_json(def_file, Definition)
    wl_file = next((tiny_root / "workloads").rglob("*.jsonl"))
    records = data.load_jsonl_file(wl_file, Trace)
    assert records == data.load_jsonl(wl_file, Trace) and len(records) == 2

    data.save_jsonl_file(records, tmp_path / "a.jsonl")
    data.dump_jsonl(records, tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    data.save_json_file(records[0], tmp_path / "a.json")
    data.dump_json(records[0], tmp_path / "b.json")
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()

    from fib_core.data.json_codec import append_jsonl_line, append_jsonl_lines

    append_jsonl_line(tmp_path / "c.jsonl", records[0])
    append_jsonl_lines(tmp_path / "c.jsonl", records[1:])
    assert data.load_jsonl(tmp_path / "c.jsonl", Trace) == records


def test_to_json_from_json_round_trip(definition: Definition):
    text = data.to_json(definition)
    assert json.loads(text) == definition.to_dict()
    assert data.from_json(text, Definition) == definition
    with pytest.raises(ValueError):
        data.from_json('{"name": 3}', Definition)


def test_definition_getters_equal_the_kit_properties(definition: Definition):
    assert definition.get_var_axes() == definition.var_axes == ["rows"]
    assert definition.get_const_axes() == definition.const_axes == {"cols": 64}
    assert definition.get_var_axes_bindings == definition.var_axis_bindings == {"rows": ("x", 0)}
    assert definition.get_input_shapes({"rows": 3}) == {"x": [3, 64], "y": [3, 64], "alpha": None}
    assert definition.get_output_shapes({"rows": 3}) == {"out": [3, 64]}
    assert definition.input_shapes({"rows": 3})["x"] == (3, 64)
    with pytest.raises(ValueError, match="rows"):
        definition.get_input_shapes()  # a var axis without a value


def test_solution_and_trace_helpers(ts: TraceSet):
    sol = ts.get_solution("tiny_dps")
    assert sol.get_entry_source() is sol.sources[0]
    assert sol.requires_build() is False
    assert json.loads(sol.to_json()) == sol.to_dict()
    cuda = Solution.from_dict(
        {
            **sol.to_dict(),
            "spec": {**sol.spec.to_dict(), "language": "cuda", "entry_point": "main.py::run"},
        }
    )
    assert cuda.requires_build() is True
    record = ts.workloads["tiny_scaled_add"][0]
    assert record.is_workload() is record.is_workload_trace() is True
    assert record.is_successful() is False


def test_top_level_names_are_the_kit_classes():
    from fib_core.bench.benchmark import Benchmark

    assert fib.TraceSet is data.TraceSet and fib.Definition is data.Definition
    assert fib.Benchmark is Benchmark and fib.BenchmarkConfig is fib_core.bench.BenchmarkConfig
    assert issubclass(fib.Benchmark, fib_core.bench.engine.flow.Engine)
    assert data.InputDesc is data.InputSpec
    from fib_core.data.trace import RandomInput, ScalarInput

    assert RandomInput is data.RandomInput and ScalarInput is data.ScalarInput
    with pytest.raises(AttributeError):
        fib.no_such_name  # noqa: B018


# --- compile ---------------------------------------------------------------------------------


def test_keyword_call_equals_the_positional_run(ts: TraceSet, definition: Definition):
    inputs = _inputs()
    expected = inputs["x"] * inputs["alpha"] + inputs["y"]
    for name in ("tiny_dps", "tiny_returning"):
        runnable = build(ts.get_solution(name), definition)
        try:
            by_name = runnable(**inputs)
            out = torch.empty(8, 64)
            positional = runnable.run([inputs["x"], inputs["y"], inputs["alpha"]], [out])
            assert torch.equal(by_name, positional[0])
            torch.testing.assert_close(by_name, expected)
            with pytest.raises(TypeError, match="missing input 'y'"):
                runnable(x=inputs["x"], alpha=1.0)
            with pytest.raises(TypeError, match="unexpected input 'z'"):
                runnable(**inputs, z=1)
        finally:
            runnable.close()


def test_runnable_in_the_organizers_form():
    closed = []
    runnable = Runnable(lambda **kw: kw["a"] + kw["b"], lambda: closed.append(True), {"k": 1})
    assert runnable(a=2, b=3) == 5 and runnable.meta == {"k": 1}
    runnable.close()
    assert closed == [True] and runnable.closed
    with pytest.raises(RuntimeError, match="closed"):
        runnable(a=1, b=1)


def test_registry_builds_once_and_clear_closes(ts: TraceSet, definition: Definition):
    registry = get_registry()
    assert registry is get_registry()
    sol = ts.get_solution("tiny_dps")
    runnable = registry.build(definition, sol)
    assert registry.build(definition, sol) is runnable
    with pytest.raises(TypeError, match="pass a Definition then a Solution"):
        registry.build(sol, definition)
    assert runnable.meta["builder"] == build(sol, definition).meta["builder"]
    inputs = _inputs()
    reference = registry.build_reference(definition)
    torch.testing.assert_close(runnable(**inputs), reference(**inputs))
    from fib_core.dataset.references import reference_run

    torch.testing.assert_close(
        reference(**inputs), reference_run(definition)(inputs["x"], inputs["y"], inputs["alpha"])
    )
    registry.clear()
    assert runnable.closed
    assert registry.build(definition, sol) is not runnable
    registry.clear()


def test_builder_classes_choose_by_language(ts: TraceSet, definition: Definition):
    sol = ts.get_solution("tiny_dps")
    as_dict = sol.to_dict()
    triton = Solution.from_dict({**as_dict, "spec": {**as_dict["spec"], "language": "triton"}})
    cuda = Solution.from_dict({**as_dict, "spec": {**as_dict["spec"], "language": "cuda"}})
    python_builder = PythonBuilder()
    assert python_builder.can_build(sol) and not python_builder.can_build(triton)
    assert TritonBuilder(python_builder).can_build(triton) and not TritonBuilder().can_build(sol)
    assert CUDABuilder().can_build(cuda) and not CUDABuilder().can_build(sol)
    with pytest.raises(BuildError, match="CUDABuilder cannot build"):
        CUDABuilder().build(definition, sol)
    with pytest.raises(BuildError, match="no builder"):
        BuilderRegistry((CUDABuilder(),)).build(definition, sol)
    assert issubclass(BuildError, RuntimeError)


def test_source_helpers(ts: TraceSet, tmp_path: Path):
    sol = ts.get_solution("tiny_dps")
    write_sources_to_dir(str(tmp_path / "d"), sol.sources)
    assert (tmp_path / "d" / "main.py").read_text() == sol.sources[0].content
    folder = Path(write_sources_to_temp(str(tmp_path / "t"), sol.sources, pkg="pkg"))
    assert folder.name == "pkg" and (folder / "__init__.py").exists()
    assert (folder / "main.py").read_text() == sol.sources[0].content
    name = create_pkg_name(sol, prefix="fib_")
    assert name.isidentifier() and name.startswith("fib_tiny_dps_")
    assert name == create_pkg_name(sol, prefix="fib_")


# --- utils -----------------------------------------------------------------------------------


def test_utils_match_the_kit_helpers():
    from fib_core import utils
    from fib_core.bench.evaluation.environment import collect_environment
    from fib_core.data.dtypes import torch_dtype

    assert utils.torch_dtype_from_def("bfloat16") is torch_dtype("bfloat16") is torch.bfloat16
    expected = (
        [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    )
    assert utils.list_cuda_devices() == expected
    env = utils.env_snapshot("cpu")
    assert isinstance(env, utils.Environment)
    assert env == collect_environment("cpu").to_environment()
    assert utils.hardware_from_device("cpu") == env.hardware


def test_redirect_stdio_to_file(tmp_path: Path):
    log = tmp_path / "logs" / "worker.log"
    code = (
        "import os, sys\n"
        "from fib_core.utils import redirect_stdio_to_file\n"
        f"redirect_stdio_to_file({str(log)!r})\n"
        "print('from python'); sys.stdout.flush()\n"
        "os.write(2, b'from fd 2\\n')\n"
    )
    repo = Path(fib_core.__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=repo, check=True
    )
    assert done.stdout == "" and done.stderr == ""
    assert log.read_text().splitlines() == ["from python", "from fd 2"]


# --- CLI functions -----------------------------------------------------------------------------


def test_cli_functions_translate_to_the_kit_command_line(tmp_path: Path):
    import argparse

    from fib_core.cli.main import run_argv

    args = argparse.Namespace(
        local=[tmp_path],
        warmup_runs=1,
        iterations=5,
        num_trials=None,
        use_isolated_runner=True,
        save_results=False,
        definitions=["d1"],
        log_level="INFO",
    )
    argv = run_argv(args)
    assert argv[:3] == ["run", "--local", str(tmp_path)]
    assert "--isolated" in argv and "--no-save-results" in argv
    assert argv[argv.index("--warmup-runs") + 1] == "1" and "--num-trials" not in argv
    from fib_core.commands import build_parser

    parsed = build_parser().parse_args(argv)  # the kit's parser takes every flag
    assert parsed.iterations == 5 and parsed.isolated and parsed.definitions == ["d1"]


def _add_passed_trace(root: Path) -> None:
    ts = TraceSet.from_path(root)
    record = ts.workloads["tiny_scaled_add"][0]
    trace = Trace.from_dict(
        {
            "definition": "tiny_scaled_add",
            "solution": "tiny_dps",
            "workload": record.workload.to_dict(),
            "evaluation": {
                "status": "PASSED",
                "log": "",
                "environment": {"hardware": "test", "libs": {}},
                "timestamp": "2026-01-01T00:00:00",
                "correctness": {"max_relative_error": 0.0, "max_absolute_error": 0.0},
                "performance": {
                    "latency_ms": 0.5,
                    "reference_latency_ms": 1.0,
                    "speedup_factor": 2.0,
                },
            },
        }
    )
    ts.add_traces([trace])


def test_cli_report_functions_equal_the_kit_commands(tiny_root: Path, tmp_path: Path, capsys):
    import argparse

    from fib_core.cli import main
    from fib_core.cli.main import best, merge, summary, visualize

    _add_passed_trace(tiny_root)
    for function, command in ((summary, "summary"), (best, "best"), (visualize, "summary")):
        status = function(argparse.Namespace(local=[tiny_root]))
        ours = capsys.readouterr().out
        assert status == main(["report", command, "--local", str(tiny_root)]) == 0
        assert ours == capsys.readouterr().out and "tiny_dps" in ours
    out = tmp_path / "merged"
    assert merge(argparse.Namespace(local=[tiny_root], output=out)) == 0
    assert (
        TraceSet.from_path(out).to_dict()["traces"]
        == TraceSet.from_path(tiny_root).to_dict()["traces"]
    )


def test_merge_and_export_tracesets(tiny_root: Path, tmp_path: Path):
    from fib_core.cli.main import export_traceset, merge_tracesets

    _add_passed_trace(tiny_root)
    ts = TraceSet.from_path(tiny_root)
    merged = merge_tracesets([ts, TraceSet.from_path(tiny_root)])
    assert merged.root is None
    assert [s.name for s in merged.solutions["tiny_scaled_add"]] == ["tiny_dps", "tiny_returning"]
    assert len(merged.workloads["tiny_scaled_add"]) == 2
    assert len(merged.traces["tiny_scaled_add"]) == 1  # the same trace twice is kept once
    export_traceset(merged, tmp_path / "exported")
    again = TraceSet.from_path(tmp_path / "exported").to_dict()
    original = ts.to_dict()
    assert {k: v for k, v in again.items() if k != "root"} == {
        k: v for k, v in original.items() if k != "root"
    }
    with pytest.raises(fib_core.errors.FibError, match="not empty"):
        export_traceset(merged, tmp_path / "exported")
    changed = Definition.from_dict(
        {**ts.definitions["tiny_scaled_add"].to_dict(), "description": "x"}
    )
    other = TraceSet(definitions={"tiny_scaled_add": changed})
    with pytest.raises(ValueError, match="differs"):
        merge_tracesets([ts, other])


# --- module paths of the apply / tracer / integration layers -------------------------------------


def test_organizers_module_paths_hold_the_same_objects():
    from fib_core import integration, tracer
    from fib_core.apply import api, hook
    from fib_core.integration import patch_manager, utils
    from fib_core.tracer import presets, rule, types

    assert hook.set_apply_hook is api.set_apply_hook and hook.get_apply_hook is api.get_apply_hook
    assert types.TracingRule is rule.TracingRule is tracer.TracingRule
    assert presets.policy_keep_first_k is tracer.policy_keep_first_k
    assert patch_manager.get_manager is integration.get_manager
    from fib_core.apply.binding import ArgBinder

    assert utils.ArgBinder is ArgBinder
    assert fib.apply is api.apply and callable(fib.apply)  # the function, not the subpackage


def test_dump_int32_selects_the_int32_tensors():
    from fib_core.tracer.presets import dump_int32

    bound = {"a": torch.zeros(2, dtype=torch.int32), "b": torch.zeros(2), "n": 3}
    assert dump_int32()(bound) == ["a"]


def test_tracing_hook_feeds_the_tracer():
    from fib_core.apply.hook import get_apply_hook, set_apply_hook
    from fib_core.tracer import make_tracing_hook

    class Recorder:
        def __init__(self):
            self.calls = []

        def collect(self, def_name, runtime_args):
            self.calls.append((def_name, dict(runtime_args)))

    recorder = Recorder()
    previous = get_apply_hook()
    set_apply_hook(make_tracing_hook(recorder))
    try:
        get_apply_hook()("some_definition", {"x": 1})
    finally:
        set_apply_hook(previous)
    assert recorder.calls == [("some_definition", {"x": 1})]
