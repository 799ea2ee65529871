"""Trace and result writes that fail: a clear line, the path of a fallback file, no half record.

Each run goes through the CLI in a subprocess on the CPU (a plain-PyTorch toy solution), so the
exit status and stderr are what a contestant sees.
"""

from __future__ import annotations

import json
import re
import resource
from pathlib import Path

from fib_core.data import Trace
from fib_core.data.json_io import iter_jsonl

from .conftest import listing, run_cli, solution, workload

TRACES = Path("traces") / "tests" / "toy" / "toy_add.jsonl"


def _fallback_of(stderr: str, target: Path, reason: str, cache: Path) -> Path:
    last = stderr.strip().splitlines()[-1]
    match = re.fullmatch(
        rf"error: cannot append traces to {re.escape(str(target))} \({reason}\); kept them in "
        rf"({re.escape(str(cache / 'unsaved-traces'))}/toy_add-\d{{8}}-\d{{6}}-\d+\.jsonl) \(copy "
        r"them into the dataset's traces/ once it is fixed\)",
        last,
    )
    assert match, stderr
    return Path(match.group(1))


def test_traces_path_is_a_directory(tmp_path, make_dataset, cache_dir):
    root = make_dataset(solutions=[solution()], workloads=[workload("w-1"), workload("w-2")])
    (root / TRACES).mkdir(parents=True)  # a folder where the traces file belongs
    before = listing(tmp_path)
    done = run_cli(
        ["run", "--local", str(root), "--device", "cpu"],
        cwd=tmp_path,
        env={"FIB_CACHE_DIR": str(cache_dir)},
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    fallback = _fallback_of(done.stderr, root / TRACES, "Is a directory", cache_dir)
    kept = [Trace.from_dict(raw) for _, raw in iter_jsonl(fallback)]
    assert sorted(t.workload.uuid for t in kept) == ["w-1", "w-2"]
    assert all(t.evaluation.status.value == "PASSED" for t in kept)
    new = listing(tmp_path) - before
    assert all(p.startswith(("ds/", "cache")) for p in new), sorted(new)


def test_full_disk_file_size_limit(tmp_path, make_dataset, cache_dir):
    root = make_dataset(solutions=[solution()], workloads=[workload("w-1")])
    traces = root / TRACES
    traces.parent.mkdir(parents=True)
    old = {
        "definition": "toy_add",
        "solution": "sol",
        "workload": workload("old")["workload"],
        "evaluation": {
            "status": "RUNTIME_ERROR",
            "log": "x" * 40_000,
            "timestamp": "2026-01-01",
            "environment": {"hardware": "cpu", "libs": {}},
        },
    }
    traces.write_text(json.dumps(old) + "\n")
    size = traces.stat().st_size
    limit = size + 200  # the next record does not fit; the small cache and fallback files do

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = run_cli(
        ["run", "--local", str(root), "--device", "cpu"],
        cwd=tmp_path,
        env={"FIB_CACHE_DIR": str(cache_dir)},
        preexec_fn=limit_file_size,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    fallback = _fallback_of(done.stderr, traces, "File too large", cache_dir)
    (kept,) = [Trace.from_dict(raw) for _, raw in iter_jsonl(fallback)]
    assert kept.workload.uuid == "w-1" and kept.evaluation.status.value == "PASSED"
    # The dataset's file is as it was: no half record left by the interrupted append.
    assert traces.stat().st_size == size and traces.read_text().endswith("}\n")


def test_results_json_path_is_a_directory(tmp_path, monkeypatch, capsys):
    from fib_core.bench.engine.shard_run import ShardResult
    from fib_core.data import Definition
    from fib_core.project.run_finish import finish
    from fib_core.project.runflow import RunOptions

    from .conftest import TOY_DEFINITION

    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "cache"))
    record = {
        "definition": "toy_add",
        "solution": "sol",
        "workload": workload("w-1")["workload"],
        "evaluation": {
            "status": "RUNTIME_ERROR",
            "log": "boom",
            "timestamp": "2026-01-01",
            "environment": {"hardware": "cpu", "libs": {}},
        },
    }
    shard = ShardResult(shard=0, order=["w-1"], traces=[record], device="cpu", gpu_name=None)
    target = tmp_path / "out.json"
    target.mkdir()
    code = finish([shard], Definition.from_dict(TOY_DEFINITION), RunOptions(json_path=target))
    assert code == 2
    err = capsys.readouterr().err.strip()
    match = re.fullmatch(
        rf"error: cannot write results to {re.escape(str(target))} \(Is a directory\); wrote "
        rf"them to ({re.escape(str(tmp_path / 'cache' / 'unsaved-traces'))}/\d{{8}}-\d{{6}}-\d+"
        r"-out\.json) instead",
        err,
    )
    assert match, err
    saved = json.loads(Path(match.group(1)).read_text())
    assert [row["uuid"] for row in saved["rows"]] == ["w-1"]
