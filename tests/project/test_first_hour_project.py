"""Up-front dataset checks, the run's scope line, and the run flow's CPU smoke settings."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from fib_core.bench.engine.shard_run import ShardResult
from fib_core.data.workload import Workload
from fib_core.dataset.checks import DatasetCheckError, check_blobs
from fib_core.project.run_finish import finish, merge_shards, run_scope
from fib_core.project.runflow import RunOptions
from fib_core.project.workspace import open_workspace

POINTER = b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 1234\n"


class _Set:
    def __init__(self, root: Path) -> None:
        self.root = root


def _workload(uuid: str, path: str) -> Workload:
    return Workload.from_dict({"uuid": uuid, "axes": {"n": 4}, "inputs": {
        "x": {"type": "safetensors", "path": path, "tensor_key": "x"},
        "s": {"type": "scalar", "value": 1.0}}})


def test_lfs_pointers_are_found_before_any_workload_runs(tmp_path: Path) -> None:
    (tmp_path / "blob").mkdir()
    for name in ("a", "b", "c"):
        (tmp_path / "blob" / f"{name}.safetensors").write_bytes(POINTER)
    workloads = [_workload(f"w{n}", f"./blob/{n}.safetensors") for n in "abc"]
    with pytest.raises(DatasetCheckError) as err:
        check_blobs(_Set(tmp_path), "some_def", workloads)
    text = str(err.value)
    assert "\n" not in text and "a.safetensors: is a git-LFS pointer" in text
    assert "(and 2 more blobs)" in text and "git lfs pull" in text


def test_missing_blob_is_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetCheckError, match=r"gone\.safetensors: workload blob not found"):
        check_blobs(_Set(tmp_path), "some_def", [_workload("w", "blob/gone.safetensors")])
    (tmp_path / "ok.safetensors").write_bytes(b"\x08" * 2048)  # not a pointer: accepted
    check_blobs(_Set(tmp_path), "some_def", [_workload("w", "ok.safetensors")])


def test_empty_dataset_folder_names_the_variable(tmp_path: Path, repo_root: Path,
                                                 monkeypatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(repo_root / "config.toml", tmp_path / "config.toml")
    monkeypatch.setenv("FIB_DATASET_PATH", str(empty))
    with pytest.raises(DatasetCheckError) as err:
        open_workspace(tmp_path / "config.toml")
    text = str(err.value)
    assert text.startswith(f"FIB_DATASET_PATH={empty}: ") and "unset it" in text
    assert "\n" not in text
    missing = tmp_path / "missing"  # the loader's own hint names the variable too
    monkeypatch.setenv("FIB_DATASET_PATH", str(missing))
    with pytest.raises(DatasetCheckError, match=f"^FIB_DATASET_PATH={missing}: .*unset it"):
        open_workspace(tmp_path / "config.toml")


def _shard(device: str, quick: bool, total: int, traces: list) -> ShardResult:
    return ShardResult(shard=0, order=[t["workload"]["uuid"] for t in traces], traces=traces,
                       device=device, gpu_name=None, total_workloads=total, quick=quick,
                       author="ada")


def _passed_cpu_trace(uuid: str) -> dict:
    return {"definition": "gdn_decode_qk4_v8_d128_k_last", "solution": "mine",
            "workload": {"uuid": uuid, "axes": {"batch_size": 1}, "inputs": {}},
            "evaluation": {
                "status": "PASSED", "log": "", "timestamp": "2026-01-01T00:00:00",
                "environment": {"hardware": "cpu", "libs": {}},
                "correctness": {"max_relative_error": 0.0, "max_absolute_error": 0.0},
                "performance": {"latency_ms": 12.0, "reference_latency_ms": 0.0,
                                "speedup_factor": 0.0, "reference_timing": {"skipped": True},
                                "iterations": 1, "num_trials": 1},
                "device": "cpu"}}


def test_scope_line():
    traces = [_passed_cpu_trace(f"u{i}") for i in range(3)]
    assert run_scope(_shard("cpu", True, 54, traces), 3) == (
        "3 of 54 workloads (quick subset, CPU smoke: correctness only)")
    assert run_scope(_shard("cuda", False, 54, traces), 54) == "54 of 54 workloads"
    assert run_scope(_shard("cuda", False, 54, traces), 3) == "3 of 54 workloads (filtered)"


def test_cpu_finish_says_what_ran_and_prints_no_score(tmp_path: Path, repo_root: Path) -> None:
    from fib_core.data import TraceSet
    from fib_core.dataset import embedded_dataset_path

    definition = TraceSet.from_path(embedded_dataset_path()).definitions[
        "gdn_decode_qk4_v8_d128_k_last"]
    traces = [_passed_cpu_trace(f"u{i}") for i in range(3)]
    buf = io.StringIO()
    out_json = tmp_path / "run.json"
    code = finish([_shard("cpu", True, 54, traces)], definition,
                  RunOptions(json_path=out_json), Console(file=buf, width=160))
    out = buf.getvalue()
    assert code == 0
    assert "Ran 3 of 54 workloads (quick subset, CPU smoke: correctness only)" in out
    assert "Score" not in out and "Passed: 3/3" in out
    import json

    data = json.loads(out_json.read_text())
    assert data["author"] == "ada"
    assert data["rows"][0]["reference_latency_ms"] is None  # not measured, not zero


def test_finish_reports_the_merge_its_caller_made_and_keeps_mapping_its_logs() -> None:
    """run_local merges the shards once, for the report and for --dump after it: finish
    reports that merge (the first shard's order), and the traces the caller keeps carry the
    logs as the report maps them (the contestant's file, not the build copy)."""
    from fib_core.data import TraceSet
    from fib_core.dataset import embedded_dataset_path

    definition = TraceSet.from_path(embedded_dataset_path()).definitions[
        "gdn_decode_qk4_v8_d128_k_last"]
    traces = [_passed_cpu_trace(f"u{i}") for i in range(3)]
    traces[2]["evaluation"]["log"] = 'File "/tmp/fib-py-ab12/fib_solution_9f_77_1/kernel.py"'
    first = _shard("cpu", True, 54, [traces[2], traces[0]])
    first.order = ["u0", "u1", "u2"]
    second = _shard("cpu", True, 54, [traces[1]])
    merged = merge_shards([first, second])
    buf = io.StringIO()
    code = finish([first, second], definition, RunOptions(source_dir="solution/triton"),
                  Console(file=buf, width=160), merged=merged)
    assert code == 0 and "Passed: 3/3" in buf.getvalue()
    kept, facts = merged
    assert [t.workload.uuid for t in kept] == ["u0", "u1", "u2"] and facts is first
    assert kept[2].evaluation.log == 'File "solution/triton/kernel.py"'
