"""run_modal.py offline: no Modal token and no network needed.

The remote function's body runs in-process through ``.local()``; sharding is checked against an
unsharded run of the same flow.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

modal = pytest.importorskip("modal")


@pytest.fixture(scope="module")
def run_modal(repo_root: Path):
    spec = importlib.util.spec_from_file_location("run_modal", repo_root / "scripts" / "run_modal.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_modal"] = module
    spec.loader.exec_module(module)
    return module


def test_module_builds_app_image_and_function(run_modal) -> None:
    assert isinstance(run_modal.app, modal.App)
    assert run_modal.run_shard._spec_.gpus == run_modal.DEFAULT_GPU == "B200"
    assert run_modal.SHARD_TIMEOUT_S > 300  # Modal's default cuts a track short


def test_remote_builds_target_the_b200s_own_isa(run_modal, monkeypatch) -> None:
    """What the container's builds resolve the target to, through the kit's own arch logic:
    the B200's capability 10.0 with the arch-specific suffix (image builds see no GPU), and the
    tvm-ffi list naming the same target."""
    from fib_core.compile.arch import (
        ARCH_ENV,
        arch_for_capability,
        arch_list_env,
        resolve_cuda_arch,
    )

    monkeypatch.setenv(ARCH_ENV, run_modal.REMOTE_ENV[ARCH_ENV])
    resolved = resolve_cuda_arch(None)
    assert resolved == [arch_for_capability(10, 0)]
    assert arch_list_env(resolved) == run_modal.REMOTE_ENV["TVM_FFI_CUDA_ARCH_LIST"]


def test_image_pins_every_runtime_dependency_exactly(run_modal, repo_root: Path) -> None:
    """The container installs each package fib_core needs at run time, at one exact version."""
    import re
    import tomllib

    project = tomllib.loads((repo_root / "pyproject.toml").read_text())["project"]
    needed = {re.split(r"[<>=!\[ ]", dep, maxsplit=1)[0].lower()
              for dep in project["dependencies"]}
    pinned = {re.split(r"\[", name, maxsplit=1)[0].lower(): version
              for name, version in run_modal.PINNED_PACKAGES.items()}
    assert needed <= set(pinned), sorted(needed - set(pinned))
    for name, version in pinned.items():
        assert re.fullmatch(r"\d+(\.\d+)+(\.post\d+)?", version), (name, version)


def test_image_ships_fib_cores_data_files(run_modal, repo_root: Path) -> None:
    """The embedded dataset's definitions are JSON: they must reach the container."""
    from modal.file_pattern_matcher import FilePatternMatcher

    ignored = FilePatternMatcher(*run_modal.FIB_CORE_IGNORE)
    data = sorted((repo_root / "fib_core" / "dataset" / "definitions").rglob("*.json"))
    assert len(data) == 5
    assert not any(ignored(p.relative_to(repo_root)) for p in data)
    assert ignored(Path("fib_core/bench/__pycache__/x.cpython-312.pyc"))


def test_modal_run_help_lists_the_options(repo_root: Path, monkeypatch) -> None:
    from click.testing import CliRunner
    from modal.cli.entry_point import entrypoint_cli

    monkeypatch.chdir(repo_root)
    result = CliRunner().invoke(entrypoint_cli, ["run", "scripts/run_modal.py", "--help"])
    assert result.exit_code == 0, result.output
    for flag in ("--gpu", "--volume", "--embedded", "--parallel", "--workloads", "--quick",
                 "--iterations", "--warmup", "--trials", "--timeout", "--isolated", "--json",
                 "--compare", "--config", "--dump", "--inline", "--ncu", "--sanitize"):
        assert flag in result.output, flag


def test_dataset_root_is_found_at_or_below_the_mount(run_modal, tmp_path: Path) -> None:
    assert run_modal.find_dataset_root(tmp_path) is None
    (tmp_path / "dataset" / "definitions").mkdir(parents=True)
    assert run_modal.find_dataset_root(tmp_path) == tmp_path / "dataset"
    (tmp_path / "definitions").mkdir()
    assert run_modal.find_dataset_root(tmp_path) == tmp_path


def test_empty_volume_gives_one_line_with_the_fix(run_modal, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(run_modal, "VOLUME_MOUNT", str(tmp_path))
    out = run_modal.run_shard_body({"solution": {}, "definition": "d", "filters": None,
                                    "quick": True, "engine": {}}, False, "my-vol")
    assert "error" in out and "\n" not in out["error"]
    assert "modal volume put my-vol ./mlsys26-contest /dataset" in out["error"]


def test_split_request_covers_every_workload_once(run_modal) -> None:
    from fib_core.bench.engine.shard_run import RunRequest, shard_of

    req = RunRequest(solution={}, definition="d", filters=None, quick=False, engine={})
    shards = run_modal.split_request(req, 3)
    assert [(s.shard, s.num_shards) for s in shards] == [(0, 3), (1, 3), (2, 3)]
    items = list(range(10))
    parts = [shard_of(items, s.shard, s.num_shards) for s in shards]
    assert sorted(x for p in parts for x in p) == items


@pytest.fixture(scope="module")
def request_dict(repo_root: Path):
    from dataclasses import asdict

    from fib_core.project.runflow import RunOptions, make_request
    from fib_core.project.workspace import open_workspace

    ws = open_workspace(repo_root / "config.toml")
    # The two smallest quick workloads: enough to split into shards, and the CPU smoke of the
    # batch-8 one alone (three calls of 16 s in Triton's interpreter) would double the test.
    flags = {"device": "cpu", "workloads": ("batch_size<8",)}
    return asdict(make_request(ws.cfg, ws.pack(), RunOptions(quick=True, flags=flags)))


@pytest.mark.slow
def test_remote_body_runs_in_process_and_shards_merge_to_the_unsharded_run(
    run_modal, request_dict
) -> None:
    """`.local()` runs the container's body here; 2 shards merge into the 1-shard result."""
    from fib_core.bench.engine.shard_run import RunRequest
    from fib_core.project.run_finish import merge_shards

    whole = run_modal.run_shard.local(request_dict, True, "unused")
    assert "error" not in whole, whole.get("error")
    req = RunRequest(**request_dict)
    parts = [
        run_modal.run_shard_body(asdict_(req.for_shard(i, 2)), True, "unused") for i in range(2)
    ]
    merged, _ = merge_shards(run_modal.collect(parts))
    single, _ = merge_shards(run_modal.collect([whole]))

    def verdicts(traces):
        return [
            (t.workload.uuid, t.evaluation.status.value,
             t.evaluation.correctness.max_absolute_error if t.evaluation.correctness else None)
            for t in traces
        ]

    assert len(single) >= 2
    assert all(t.evaluation.status.value == "PASSED" for t in single)
    assert verdicts(merged) == verdicts(single)


def asdict_(obj):
    from dataclasses import asdict

    return asdict(obj)
