"""``validate`` on the embedded dataset, on a copy with planted faults (each fault is exactly
one new finding, naming its file and field), on a dataset in the flat layout of the organizers'
FFI example, and through the command line (report files, validate-render, usage mistakes)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fib_core.validate import CPU_CATEGORIES, load_report, render_text, validate_dataset

HERE = Path(__file__).parent
TOY = HERE.parent / "bench" / "fixtures"
SOLUTIONS = TOY / "solutions"
FFI = HERE / "fixtures" / "ffi_example"


def _solution(name: str, author: str, source: str, entry: str = "main.py::run") -> dict:
    return {"name": name, "definition": "toy_axpy", "author": author,
            "spec": {"language": "python", "target_hardware": ["cpu", "cuda"],
                     "entry_point": entry},
            "sources": [{"path": "main.py", "content": source}]}


def toy_dataset(root: Path) -> Path:
    """The toy definition (described in full), its two workloads and one solution."""
    definition = json.loads((TOY / "toy_axpy.json").read_text())
    for group in ("inputs", "outputs"):
        for name, spec in definition[group].items():
            spec["description"] = f"the {name} operand"
    (root / "definitions" / "toy").mkdir(parents=True)
    (root / "definitions" / "toy" / "toy_axpy.json").write_text(json.dumps(definition))
    (root / "workloads" / "toy").mkdir(parents=True)
    shutil.copy(TOY / "toy_axpy.jsonl", root / "workloads" / "toy" / "toy_axpy.jsonl")
    folder = root / "solutions" / "tests" / "toy_axpy"
    folder.mkdir(parents=True)
    source = (SOLUTIONS / "correct.py").read_text()
    (folder / "correct.json").write_text(json.dumps(_solution("correct", "tests", source)))
    return root


def problems(report) -> set[str]:
    return set(report.findings("error")) | set(report.findings("warning"))


def test_embedded_dataset_has_no_errors() -> None:
    report = validate_dataset(disable_gpu=True, outputs=[])
    assert report.definitions, "the embedded dataset has definitions"
    assert report.findings("error") == []
    for entry in report.definitions.values():
        for category, result in entry.results():
            assert (result is None) == (category not in CPU_CATEGORIES)
        assert any(m.message.endswith(" valid") and not m.message.startswith("0 ")
                   for m in entry.workload.messages)


def test_each_planted_fault_is_one_finding(tmp_path: Path) -> None:
    clean = validate_dataset(toy_dataset(tmp_path / "clean"), disable_gpu=True, outputs=[])
    root = toy_dataset(tmp_path / "broken")
    # 1. layout: the workload file under another op_type's folder
    (root / "workloads" / "misc").mkdir()
    (root / "workloads" / "toy" / "toy_axpy.jsonl").rename(
        root / "workloads" / "misc" / "toy_axpy.jsonl")
    lines = (root / "workloads" / "misc" / "toy_axpy.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    # 2. workload: an axis of 0
    zero = json.loads(json.dumps(record))
    zero["workload"].update(uuid="toy-0003-zero", axes={"n": 0})
    # 3. layout: a blob that is not there
    blob = json.loads(json.dumps(record))
    blob["workload"]["uuid"] = "toy-0004-blob"
    blob["workload"]["inputs"]["x"] = {"type": "safetensors", "path": "blob/missing.safetensors",
                                       "tensor_key": "x"}
    extra = "\n".join(json.dumps(r) for r in (zero, blob))
    (root / "workloads" / "misc" / "toy_axpy.jsonl").write_text("\n".join(lines) + "\n" + extra
                                                                + "\n")
    # 7. layout: a record of toy_axpy in another definition's file
    stray = json.loads(json.dumps(record))
    stray["workload"]["uuid"] = "toy-0005-stray"
    (root / "workloads" / "misc" / "stray.jsonl").write_text(json.dumps(stray) + "\n")
    # 4. definition: no description
    path = root / "definitions" / "toy" / "toy_axpy.json"
    definition = json.loads(path.read_text())
    definition["description"] = ""
    path.write_text(json.dumps(definition))
    # 5. solution: an entry point outside its sources
    bad = _solution("broken", "tests", "def run(x, y, alpha, out):\n    pass\n",
                    entry="other.py::run")
    (root / "solutions" / "tests" / "toy_axpy" / "broken.json").write_text(json.dumps(bad))
    # 6. trace: a trace of a solution the dataset does not hold
    trace = {**record, "solution": "ghost", "evaluation": {
        "status": "PASSED", "log": "", "environment": {"hardware": "cpu", "libs": {}},
        "timestamp": "2026-01-01T00:00:00+00:00",
        "correctness": {"max_relative_error": 0.0, "max_absolute_error": 0.0},
        "performance": {"latency_ms": 1.0, "reference_latency_ms": 1.0, "speedup_factor": 1.0}}}
    (root / "traces" / "tests" / "toy").mkdir(parents=True)
    (root / "traces" / "tests" / "toy" / "toy_axpy.jsonl").write_text(json.dumps(trace) + "\n")

    broken = validate_dataset(root, disable_gpu=True, outputs=[])
    new = problems(broken) - problems(clean)
    expected = {  # (category, start of the line: file and field)
        "layout": ["workloads/misc/toy_axpy.jsonl: op_type:",
                   "workloads/misc/toy_axpy.jsonl:4: workload.inputs.x.path:",
                   "workloads/misc/stray.jsonl:1: definition:"],
        "workload": ["workloads/misc/toy_axpy.jsonl:3: workload.axes.n:"],
        "definition": ["definitions/toy/toy_axpy.json: description:"],
        "solution": ["solutions/tests/toy_axpy/broken.json: spec.entry_point:"],
        "trace": ["traces/tests/toy/toy_axpy.jsonl:1: solution:"],
    }
    assert len(new) == sum(len(v) for v in expected.values()), sorted(new)
    entry = broken.definitions["toy_axpy"]
    for category, starts in expected.items():
        lines = [m.message for m in getattr(entry, category).messages if m.level != "info"]
        for start in starts:
            hits = [line for line in lines if line.startswith(start)]
            assert len(hits) == 1, (start, lines)
            assert "; " in hits[0] or ", expected " in hits[0]  # ... and what to do
    assert entry.status == "error"


def test_flat_layout_of_the_ffi_example(tmp_path: Path) -> None:
    root = shutil.copytree(FFI, tmp_path / "ffi")
    report = validate_dataset(root, disable_gpu=True, outputs=[])
    entry = report.definitions["gemm_n64_k64"]
    assert report.findings("error") == []
    layout = sorted(m.message.split(":")[0] for m in entry.layout.messages)
    assert layout == ["definitions/gemm_n64_k64.json", "solutions/example_agent_solution.json",
                      "workloads/gemm_n64_k64.jsonl"]
    assert all("move" in m.message for m in entry.layout.messages)
    fields = sorted(m.message.split(": ")[1] for m in entry.definition.messages)
    assert fields == ["axes.K.description", "axes.M.description", "axes.N.description",
                      "inputs.A.description", "inputs.B.description", "outputs.C.description"]
    assert [m.message for m in entry.workload.messages] == ["2 valid"]


def test_filters_and_categories(tmp_path: Path) -> None:
    root = shutil.copytree(FFI, tmp_path / "ffi")
    toy_dataset(root)
    only = validate_dataset(root, op_types=["toy"], checks=["workload", "layout"],
                            disable_gpu=True, outputs=[])
    assert list(only.definitions) == ["toy_axpy"]
    assert only.config.checks == ["layout", "workload"]
    assert only.definitions["toy_axpy"].definition is None
    both = validate_dataset(root, op_types=["toy"], definitions=["gemm_n64_k64"],
                            disable_gpu=True, outputs=[])
    assert sorted(both.definitions) == ["gemm_n64_k64", "toy_axpy"]


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fib_core", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_cli_writes_report_and_render_reads_it(tmp_path: Path) -> None:
    root = toy_dataset(tmp_path / "ds")
    out = _cli("validate", "--dataset", str(root), "--disable-gpu", "--outputs", "json,text",
               "--output-folder", str(tmp_path / "reports"))
    assert out.returncode == 0, out.stderr
    [report_json] = (tmp_path / "reports").glob("report-*.json")
    [report_txt] = (tmp_path / "reports").glob("report-*.txt")
    report = load_report(report_json)
    assert report.config.disable_gpu and report.config.checks == list(CPU_CATEGORIES)
    assert report_txt.read_text().strip() == render_text(report)
    shown = _cli("validate-render", str(report_json))
    assert shown.returncode == 0
    assert shown.stdout.splitlines()[0] == "=== Dataset Validation Report ==="
    assert "--- toy_axpy [WARNING] ---" in shown.stdout  # no baseline: warnings only
    assert "  benchmark:   None (skipped)" in shown.stdout


def test_cli_mistakes_are_one_line(tmp_path: Path) -> None:
    root = toy_dataset(tmp_path / "ds")
    typo = _cli("validate", "--dataset", str(root), "--definitions", "toy_axpi", "--disable-gpu")
    assert typo.returncode == 2
    assert typo.stderr.strip().splitlines() == [
        "error: --definitions: 'toy_axpi' is not in the dataset; did you mean 'toy_axpy'?"]
    category = _cli("validate", "--dataset", str(root), "--checks", "layout,speed")
    assert category.returncode == 2 and "unknown category 'speed'" in category.stderr
    (tmp_path / "bad.json").write_text("[1, 2]")
    bad = _cli("validate-render", str(tmp_path / "bad.json"))
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1 and "bad.json" in bad.stderr


def test_a_fault_makes_the_exit_status_one(tmp_path: Path) -> None:
    root = toy_dataset(tmp_path / "ds")
    (root / "solutions" / "tests" / "toy_axpy" / "correct.json").write_text("{")
    out = _cli("validate", "--dataset", str(root), "--disable-gpu", "--outputs", "stdout")
    assert out.returncode == 1
    assert "solutions/tests/toy_axpy/correct.json:1: found " in out.stdout
    assert "expected valid JSON" in out.stdout


@pytest.mark.slow
def test_benchmark_runs_reference_and_baseline(tmp_path: Path) -> None:
    root = toy_dataset(tmp_path / "ds")
    folder = root / "solutions" / "baseline" / "toy_axpy"
    folder.mkdir(parents=True)
    wrong = (SOLUTIONS / "wrong.py").read_text()
    (folder / "slow.json").write_text(json.dumps(_solution("slow", "baseline", wrong)))
    report = validate_dataset(root, checks=["benchmark"], outputs=[], device="cpu")
    result = report.definitions["toy_axpy"].benchmark
    lines = [m.message for m in result.messages]
    assert result.status == "error"
    assert any(line.startswith("reference: 2/2 workloads passed") for line in lines), lines
    [failure] = [line for line in lines if not line.startswith(("reference", "no GPU"))]
    assert failure.startswith("solutions/baseline/toy_axpy/slow.json: sources: baseline slow "
                              "failed 2 of 2 workloads")


def test_without_a_gpu_the_default_leaves_the_benchmark_out(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the default runs the benchmark")
    out = _cli("validate", "--dataset", str(toy_dataset(tmp_path / "ds")), "--outputs", "stdout")
    assert out.returncode == 0, out.stderr
    assert "checks:        layout, definition, workload, solution, trace, baseline\n" in out.stdout
    assert out.stdout.rstrip().splitlines()[-1].startswith("note: no GPU here, so the benchmark")
