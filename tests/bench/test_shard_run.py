"""The engine's one-shard run (``fib_core.bench.engine.shard_run``) on the CPU, over the toy
dataset: its selection and share, its result, and the layering it keeps (it loads nothing of
the launcher, the baselines or the report: the calls of a run request go down only)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fib_core.bench.engine.shard_run import RunRequest, execute
from fib_core.data.trace import EvaluationStatus
from fib_core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
UUIDS = ["toy-0001-small", "toy-0002-large"]


def _request(dataset: Path, solution: dict, **fields) -> RunRequest:
    return RunRequest(**{"solution": solution, "definition": "toy_axpy", "filters": None,
                         "quick": False, "engine": {}, "device": "cpu",
                         "dataset_path": str(dataset), **fields})


def _layers() -> list[str]:
    """The layering tests/test_layout_imports.py keeps (one list, read from there)."""
    spec = importlib.util.spec_from_file_location("layout", ROOT / "tests" /
                                                  "test_layout_imports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LAYERS


def test_a_shard_runs_its_round_robin_share_and_knows_the_whole_selection(
        make_dataset, toy_solution_json):
    request = _request(make_dataset([]), toy_solution_json("correct"), filters=["toy-"],
                       shard=1, num_shards=2)
    first = execute(request)
    assert first.shard == 1 and first.device == "cpu" and first.gpu_name is None
    assert first.order == UUIDS  # the whole selection, for merging the shards in order
    assert [t.workload.uuid for t in first.traces] == UUIDS[1:]
    assert first.traces[0].evaluation.status == EvaluationStatus.PASSED
    assert first.total_workloads == 2 and first.author == "tests"
    assert first.baseline is None  # the launcher's to add, never the engine's


def test_a_definition_missing_from_the_dataset_is_one_line(make_dataset, toy_solution_json):
    request = _request(make_dataset([]), toy_solution_json("correct"))
    request.definition = "no_such_definition"
    with pytest.raises(ConfigError, match="no_such_definition is not in the dataset"):
        execute(request)


PROBE = """
import json, sys
from fib_core.bench.engine.shard_run import RunRequest, execute
from fib_core.bench.engine import gpus, gpu_processes  # the several-GPU fan-out too
shard = execute(RunRequest(**json.loads(sys.argv[1])))
assert [t.evaluation.status.value for t in shard.traces] == ["PASSED", "PASSED"], shard
print(json.dumps(sorted({m.split(".")[1] for m in sys.modules
                         if m.startswith("fib_core.") and m.count(".") >= 1})))
"""


def test_the_engine_run_loads_no_package_above_it(make_dataset, toy_solution_json):
    """A run request's path goes down: run here by the engine, a shard loads no module of
    the launcher (``project``) or of anything else above ``bench`` in the layering."""
    layers = _layers()
    request = _request(make_dataset([]), toy_solution_json("correct"))
    fields = {k: getattr(request, k) for k in request.__dataclass_fields__}
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(fields)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    above = set(layers[: layers.index("bench")])
    assert "bench" in loaded and "dataset" in loaded  # the probe saw the engine's own run
    assert not loaded & above, f"the engine's run loaded {sorted(loaded & above)}"


@pytest.mark.parametrize("shard", [0, 1])
def test_the_launcher_times_the_baseline_on_the_workloads_the_engine_ran(
        make_dataset, toy_solution_json, monkeypatch, shard):
    """``runflow.execute`` hands the baseline this shard's dataset records, the ones the
    engine's traces name, in their order (not a selection of its own that could differ)."""
    from fib_core.project import runflow

    def engine_on_a_gpu(request, on_event=None, trace_set=None):
        result = execute(request, on_event=on_event, trace_set=trace_set)  # a real CPU run
        result.device = "cuda"  # as a GPU run comes back: the launcher adds the baseline
        return result

    asked = {}

    def baseline(request, trace_set, workloads, traces, device, on_event):
        asked.update(workloads=workloads, traces=[t.workload.uuid for t in traces])
        return {"reason": "not measured in this test"}

    monkeypatch.setattr(runflow, "execute_shard", engine_on_a_gpu)
    monkeypatch.setattr(runflow, "_baseline", baseline)
    request = _request(make_dataset([]), toy_solution_json("correct"), filters=["toy-"],
                       shard=shard, num_shards=2)
    result = runflow.execute(request)
    assert asked["traces"] == [UUIDS[shard]]
    assert [w.workload.uuid for w in asked["workloads"]] == [UUIDS[shard]]
    assert all(w.workload.axes for w in asked["workloads"])  # the dataset's records
    assert result.baseline == {"reason": "not measured in this test"}
