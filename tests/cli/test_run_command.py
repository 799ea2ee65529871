"""`python -m fib_core run` end to end on CPU: table, exit status, saved traces, --resume."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fib_core.cli import main

FAST = ["--device", "cpu", "--warmup-runs", "1", "--iterations", "2", "--num-trials", "1",
        "--timeout", "120"]


def _trace_lines(root: Path) -> list[dict]:
    return [json.loads(line) for f in sorted((root / "traces").rglob("*.jsonl"))
            for line in f.read_text().splitlines() if line.strip()]


@pytest.fixture
def fresh_dataset(tmp_path, dataset_writer):
    write, _ = dataset_writer
    root = write(tmp_path / "ds", [])
    wrong = json.loads(next((root / "solutions").rglob("broken.json")).read_text())
    wrong["name"] = "triple"
    wrong["sources"][0]["content"] = "def run(x):\n    return 3.0 * x\n"
    sol_file = tmp_path / "triple.json"
    sol_file.write_text(json.dumps(wrong))
    return root, sol_file


def test_run_saves_traces_reports_failures_and_resumes(fresh_dataset, capsys):
    root, sol_file = fresh_dataset
    code = main(["run", "--local", str(root), "--local", str(sol_file),
                 "--solutions", "fast", "triple", *FAST])
    out = capsys.readouterr().out
    assert code == 1  # triple computes 3x instead of 2x
    assert out.count("CPU smoke run") >= 4
    assert "[6/6]" in out
    triple = out[out.index("triple by bob"):]
    assert triple.count("INCORRECT_NUMERICAL") >= 3 and "Passed: 0/3" in triple
    fast = out[out.index("fast by alice"):out.index("triple by bob")]
    # A CPU run proves correctness only: no score line, and it says why.
    assert "Passed: 3/3" in fast and "Score" not in out and "No score: a CPU smoke run" in fast
    lines = _trace_lines(root)
    assert sorted((t["solution"], t["evaluation"]["status"]) for t in lines) == (
        [("fast", "PASSED")] * 3 + [("triple", "INCORRECT_NUMERICAL")] * 3)
    assert next((root / "solutions").rglob("triple.json"))  # saved with its traces

    code = main(["run", "--local", str(root), "--solutions", "fast", "triple", "--resume", *FAST])
    out = capsys.readouterr().out
    assert code == 1 and out.count("skipped (already measured)") == 6
    assert "Passed: 3/3" in out and "Passed: 0/3" in out
    assert len(_trace_lines(root)) == 6  # nothing measured again


def test_no_save_results_leaves_dataset_untouched(fresh_dataset, capsys):
    root, sol_file = fresh_dataset
    code = main(["run", "--local", str(root), "--local", str(sol_file), "--solutions", "fast",
                 "--workloads", "aaaa0001", "--no-save-results", *FAST])
    out = capsys.readouterr().out
    assert code == 0 and "Passed: 1/1" in out and "[1/1] PASSED" in out
    assert not (root / "traces").exists()
    assert not list((root / "solutions").rglob("triple.json"))


def test_nothing_to_run_is_an_error(fresh_dataset, capsys):
    root, _ = fresh_dataset
    assert main(["run", "--local", str(root), "--solutions", "nobody", *FAST]) == 2
    assert "error: --solutions: 'nobody' is not in the dataset" in capsys.readouterr().err
    assert main(["run", "--local", str(root), "--workloads", "ffff", *FAST]) == 2
    assert "nothing to benchmark" in capsys.readouterr().err


def test_module_entry_point(fresh_dataset):
    root, _ = fresh_dataset
    proc = subprocess.run([sys.executable, "-m", "fib_core", "report", "summary", "--local",
                           str(root)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "no traces found" in proc.stdout
