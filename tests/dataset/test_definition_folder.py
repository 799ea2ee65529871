"""A sixth definition from one folder only, found through $FIB_DEFINITIONS_PATH.

The folder holds everything the kit needs (definition, reference, workloads, input generator,
cost model, checker, evaluation settings); nothing in the kit names it. A second folder with
only the definition and its reference shows that a missing plugin costs that feature alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fib_core.dataset import registry

TOY = "toy_scale_rows_d8"

DEFINITION = {
    "name": TOY,
    "op_type": "toy",
    "description": "out = x * w[None, :] + bias (rows of 8 scaled and shifted)",
    "axes": {"rows": {"type": "var"}, "d": {"type": "const", "value": 8}},
    "inputs": {
        "x": {"shape": ["rows", "d"], "dtype": "float32"},
        "w": {"shape": ["d"], "dtype": "float32"},
        "bias": {"shape": None, "dtype": "float32"},
    },
    "outputs": {"out": {"shape": ["rows", "d"], "dtype": "float32"}},
}

FILES = {
    "reference.py": """
import torch


def run(x, w, bias):
    return x * w[None, :] + bias
""",
    "workloads.py": """
COLUMNS = ("rows",)
ROWS = [(64,), (2,), (16,), (4,), (256,)]
BLOB_INPUTS = ("w",)


def scalars(row):
    return {"bias": 0.5}


def blobs(axes, gen):
    import torch

    return {"w": torch.arange(1, 9, dtype=torch.float32) / 8}
""",
    "generator.py": """
import torch


def generate(definition, axes, gen, device):
    x = torch.full((axes["rows"], axes["d"]), 3.0, device=device)
    return {"x": x}
""",
    "cost.py": """
from fib_core.dataset.roofline import Cost


def cost(axes, inputs):
    n = axes["rows"] * 8
    return Cost(bytes=4 * (2 * n + 8), flops=2 * n, dtype="float32")
""",
    "checker.py": """
from fib_core.checking import CheckResult
from fib_core.data.trace import Correctness, EvaluationStatus


def check(definition, outputs, reference, inputs, tolerance):
    diff = float((outputs["out"] - reference["out"]).abs().max())
    correctness = Correctness(max_relative_error=0.0, max_absolute_error=diff,
                              extra={"toy_checker": True})
    if diff <= tolerance.atol:
        return CheckResult(EvaluationStatus.PASSED, correctness, "")
    return CheckResult(EvaluationStatus.INCORRECT_NUMERICAL, correctness, f"out off by {diff}")
""",
    "tracing.py": """
from fib_core.tracing_rules import TracingRule, policy_keep_first_k

RULE = TracingRule(tensors_to_dump=["x"], dedup_policy=policy_keep_first_k(2))
""",
    "eval.toml": """
[contest]
warmup = 1
iterations = 3
trials = 1
atol = 0.001
""",
}

SOLUTION = """
def run(x, w, bias, out):
    out.copy_(x * w[None, :] + bias)
"""


def make_toy(root: Path, name: str = TOY, files: tuple[str, ...] = tuple(FILES)) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "definition.json").write_text(json.dumps({**DEFINITION, "name": name}))
    for file in files:
        (folder / file).write_text(FILES[file].lstrip())
    return folder


@pytest.fixture
def toy_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    defs = tmp_path / "defs"
    make_toy(defs)
    make_toy(defs, "toy_bare_d8", ("reference.py",))
    monkeypatch.setenv(registry.PATH_ENV, str(defs))
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "cache"))
    return defs


def test_registry_finds_the_folder_and_its_plugins(toy_path: Path) -> None:
    assert {TOY, "toy_bare_d8"} <= set(registry.definitions())
    assert len(registry.definitions()) == 7
    toy = registry.get(TOY)
    assert registry.plugin_kinds(toy) == [
        "workloads", "generator", "cost", "checker", "tracing", "settings"
    ]
    bare = registry.get("toy_bare_d8")
    assert (bare.generator, bare.cost, bare.checker, bare.workload_rows()) == (None, None, None, [])


def test_the_tracer_learns_the_folders_rule_through_the_registry(
    toy_path: Path, tmp_path: Path
) -> None:
    from fib_core.tracer import Tracer, axes_only_rule, full_preset

    rules = full_preset()
    assert rules[TOY] is registry.get(TOY).tracing_rule
    assert rules[TOY].tensors_to_dump == ["x"]
    assert "toy_bare_d8" not in rules  # no tracing.py: the tracer's default rule
    tracer = Tracer(out_dir=tmp_path / "ds" / "traces" / "workloads")
    assert tracer.rules[TOY] is rules[TOY] and tracer.default_rule is axes_only_rule
    # The kit's own definitions bring theirs the same way.
    assert rules["gdn_prefill_qk4_v8_d128_k_last"].tensors_to_dump == ["cu_seqlens"]


def test_a_tracing_rule_of_the_wrong_type_is_one_line_naming_it(toy_path: Path) -> None:
    from fib_core.tracer import full_preset

    (toy_path / TOY / "tracing.py").write_text("RULE = ['x']\n")
    with pytest.raises(registry.DefinitionFolderError) as info:
        full_preset()
    message = str(info.value)
    assert "tracing.py" in message and "TracingRule" in message and "\n" not in message


def test_engine_lookups_reach_the_folder(toy_path: Path) -> None:
    from fib_core.bench.evaluation.check import checker_for
    from fib_core.bench.evaluation.inputs import input_generator_for
    from fib_core.bench.grading import eval_settings
    from fib_core.data import Definition
    from fib_core.dataset.roofline import workload_cost
    from fib_core.dataset.tracks import tracks

    toy = registry.get(TOY)
    assert input_generator_for(TOY) is toy.generator
    assert checker_for(Definition.from_dict(toy.definition_dict())) == (TOY, toy.checker)
    assert workload_cost(TOY, {"rows": 4}).bytes == 4 * (2 * 32 + 8)
    assert eval_settings(TOY).contest_fields()["atol"] == 0.001
    assert tracks()["toy"] == ("toy_bare_d8", TOY)
    with pytest.raises(KeyError):
        workload_cost("toy_bare_d8", {"rows": 4})
    bare = Definition.from_dict(registry.get("toy_bare_d8").definition_dict())
    assert checker_for(bare) == ("elementwise", None)


def test_embedded_dataset_holds_the_toy_without_breaking_on_the_bare_one(toy_path: Path) -> None:
    from fib_core.data import TraceSet
    from fib_core.dataset import embedded_dataset_path

    ts = TraceSet.from_path(embedded_dataset_path())
    assert ts.definitions[TOY].reference.lstrip().startswith("import torch")
    toy = ts.workloads[TOY]
    assert [t.workload.axes["rows"] for t in toy] == [64, 2, 16, 4, 256]
    assert sorted(t.workload.axes["rows"] for t in toy if t.workload.tags) == [2, 4, 16]
    assert toy[0].workload.inputs["w"].to_dict()["type"] == "safetensors"
    assert toy[0].workload.inputs["bias"].to_dict() == {"type": "scalar", "value": 0.5}
    assert "toy_bare_d8" in ts.definitions and not ts.workloads.get("toy_bare_d8")
    assert len(ts.workloads["gdn_decode_qk4_v8_d128_k_last"]) == 54


def test_a_broken_folder_is_one_line_naming_the_file(tmp_path: Path, monkeypatch) -> None:
    folder = make_toy(tmp_path / "defs", files=("reference.py",))
    (folder / "cost.py").write_text("def cost(axes, inputs:\n")
    monkeypatch.setenv(registry.PATH_ENV, str(tmp_path / "defs"))
    with pytest.raises(registry.DefinitionFolderError, match=r"cost\.py: cannot be loaded"):
        _ = registry.get(TOY).cost
    (folder / "definition.json").write_text(json.dumps({**DEFINITION, "name": "other"}))
    monkeypatch.setenv(registry.PATH_ENV, str(tmp_path / "defs") + os.pathsep)
    with pytest.raises(registry.DefinitionFolderError, match="differs from its folder"):
        registry.definitions()


@pytest.mark.parametrize("script", [["run_local.py"], ["pack_solution.py"],
                                    ["switch_track.py", "--list"]])
def test_a_broken_folder_stops_the_scripts_with_one_line(
    tmp_path: Path, repo_root: Path, script: list[str]
) -> None:
    """Read when the script needs it, inside its error handling: no traceback at import."""
    folder = tmp_path / "defs" / "broken"
    folder.mkdir(parents=True)
    (folder / "definition.json").write_text('{"name": "broken",')
    env = dict(os.environ, PYTHONPATH=str(repo_root), **{registry.PATH_ENV: str(tmp_path / "defs")})
    proc = subprocess.run([sys.executable, str(repo_root / "scripts" / script[0]), *script[1:]],
                          capture_output=True, text=True, cwd=repo_root, env=env, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: {folder / 'definition.json'}")


@pytest.mark.slow
def test_run_local_runs_the_toy_on_cpu_with_a_roofline_column(
    toy_path: Path, tmp_path: Path, repo_root: Path
) -> None:
    fork = tmp_path / "fork"
    (fork / "solution" / "python").mkdir(parents=True)
    (fork / "solution" / "python" / "kernel.py").write_text(SOLUTION.lstrip())
    (fork / "config.toml").write_text(
        f'[solution]\nname = "toy-python"\ndefinition = "{TOY}"\nauthor = "me"\n\n'
        '[build]\nlanguage = "python"\nentry_point = "kernel.py::run"\n'
    )
    out = tmp_path / "toy.json"
    env = dict(os.environ, COLUMNS="160", PYTHONPATH=str(repo_root))
    env.pop("FIB_DATASET_PATH", None)
    proc = subprocess.run(
        [
            sys.executable,
            str(repo_root / "scripts" / "run_local.py"),
            "--config",
            str(fork / "config.toml"),
            "--device",
            "cpu",
            "--no-ledger",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=fork,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "roofline" in proc.stdout and "Passed: 3/3" in proc.stdout
    data = json.loads(out.read_text())
    assert data["definition"] == TOY
    assert sorted(r["axes"]["rows"] for r in data["rows"]) == [2, 4, 16]
    assert all(r["status"] == "PASSED" for r in data["rows"])

    # The same rows on a GPU the roofline model knows: the floor comes from the folder's cost.py.
    from fib_core.dataset.roofline import GPU_PEAKS
    from fib_core.report.roofline_view import RooflineView

    view = RooflineView(TOY, "NVIDIA H100 80GB HBM3")
    floor_ms, fraction, _ = view.figures({"rows": 4}, latency_ms=0.01)
    assert floor_ms == pytest.approx(4 * (2 * 32 + 8) / (GPU_PEAKS["H100 SXM"].bandwidth_gbs * 1e6))
    assert RooflineView("toy_bare_d8", "NVIDIA H100 80GB HBM3").figures({"rows": 4}, 0.01) is None
