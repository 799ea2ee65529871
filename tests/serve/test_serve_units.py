"""The server's parts that need no server: device lists, the task store's bounds, the solution
names, the flags' checks (one line, exit status 2, before anything starts)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fib_core.errors import ConfigError
from fib_core.serve.cli import parse_devices
from fib_core.serve.tasks import StoreFull, TaskStatus, TaskStore


def test_devices() -> None:
    assert parse_devices("cuda:1,cuda:0", 2) == [("cuda:1", "1"), ("cuda:0", "0")]
    assert parse_devices(None, 0) == [("cpu", None)]
    for text, visible, words in (("cuda:2", 2, "sees 2 GPU"), ("gpu0", 1, "not a device"),
                                 ("cpu,cuda:0", 1, "mixes"), (" , ", 1, "empty")):
        with pytest.raises(ConfigError, match=words):
            parse_devices(text, visible)


def test_store_keeps_what_is_unfinished_and_drops_the_oldest_finished() -> None:
    store = TaskStore(max_tasks=3)
    tasks = [store.create("toy", {"name": f"s{i}"}, ["w"]) for i in range(3)]
    with pytest.raises(StoreFull):
        store.create("toy", {"name": "s3"}, ["w"])
    store.running(tasks[1], "cpu")
    store.finish(tasks[1], [], None)
    store.finish(tasks[2], None, "no workloads")
    assert store.get(tasks[2].id).status is TaskStatus.FAILED
    newest = store.create("toy", {"name": "s4"}, ["w"])
    assert store.get(tasks[1].id) is None  # the oldest finished went first
    assert {store.get(t.id) is not None for t in (tasks[0], tasks[2], newest)} == {True}
    assert store.unfinished([tasks[0].id, tasks[2].id])
    assert not store.unfinished([tasks[2].id, "unknown"])
    view = store.get(tasks[2].id).view()
    assert view == {"task_id": tasks[2].id, "status": "failed", "definition": "toy",
                    "solution": "s2", "traces": None, "error": "no workloads"}


@pytest.mark.slow
@pytest.mark.parametrize("flags, words", [
    (["--iterations", "0"], "--iterations"),
    (["--max-queued", "0"], "--max-queued 0: must be above 0"),
    (["--devices", "tpu:0"], "'tpu:0' is not a device"),
    (["--local", "no-such-folder"], "no-such-folder"),
])
def test_bad_flags_are_one_line(flags: list[str], words: str, tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    out = subprocess.run([sys.executable, "-m", "fib_core", "serve", "--port", "0", *flags],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], lines


def test_result_folders_are_hidden_from_workers(tmp_path: Path, monkeypatch) -> None:
    """What the server sets for its lanes: the dataset's solutions/ and traces/ join the
    folders every worker's sandbox hides (the dataset itself stays read-only)."""
    from fib_core.bench.containment.mounts import HIDE_VAR, worker_mounts

    dataset = tmp_path / "dataset"
    for folder in ("definitions", "solutions", "traces"):
        (dataset / folder).mkdir(parents=True)
    monkeypatch.setenv(HIDE_VAR, f"{dataset / 'solutions'}:{dataset / 'traces'}")
    mounts = worker_mounts(dataset)
    assert str((dataset / "solutions").resolve()) in mounts.hidden
    assert str((dataset / "traces").resolve()) in mounts.hidden
    assert str(dataset.resolve()) in mounts.readonly
    monkeypatch.delenv(HIDE_VAR)
    assert str((dataset / "traces").resolve()) not in worker_mounts(dataset).hidden
