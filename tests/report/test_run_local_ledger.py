"""run_local.py records each run in the fork's ledger, compares with it, and writes the page."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fib_core.report.ledger import load_ledger

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]


def _fork(repo_root: Path, tmp_path: Path) -> Path:
    fork = tmp_path / "fork"
    fork.mkdir()
    shutil.copy(repo_root / "config.toml", fork / "config.toml")
    shutil.copytree(
        repo_root / "solution", fork / "solution", ignore=shutil.ignore_patterns("__pycache__")
    )
    (fork / ".gitignore").write_text("runs/\n")
    git = ["git", "-C", str(fork), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    return fork


def _run(repo_root: Path, fork: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="160", PYTHONPATH=str(repo_root))
    env.pop("FIB_DATASET_PATH", None)
    return subprocess.run(
        [
            sys.executable,
            str(repo_root / "scripts" / "run_local.py"),
            "--workloads",
            "acfd1138",
            *args,
        ],
        cwd=fork,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_two_runs_land_in_the_ledger_and_the_second_compares_with_the_first(
    repo_root: Path, tmp_path: Path
) -> None:
    fork = _fork(repo_root, tmp_path)
    first = _run(repo_root, fork, "--cross-check")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    [rec] = load_ledger(fork / "runs" / "ledger.jsonl")
    head = subprocess.run(
        ["git", "-C", str(fork), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert rec.git.commit == head and rec.git.dirty is False
    assert rec.config["filters"] == ["acfd1138"] and rec.config["cross_check"] is True
    assert [r.axes["batch_size"] for r in rec.results.rows] == [1]
    assert rec.results.rows[0].spread is not None
    if rec.device == "cpu":
        assert "needs a CUDA GPU" in first.stdout
    (fork / "solution" / "triton" / "kernel.py").write_text(
        (fork / "solution" / "triton" / "kernel.py").read_text() + "\n# edited\n"
    )
    second = _run(repo_root, fork, "--compare", head[:7], "--html", "out/report.html")
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert f"compared with run {rec.run_id}" in second.stdout
    runs = load_ledger(fork / "runs" / "ledger.jsonl")
    assert len(runs) == 2 and runs[1].git.dirty is True
    assert runs[1].solution_hash != runs[0].solution_hash
    page = (fork / "out" / "report.html").read_text()
    assert 'data-uuid="' + rec.results.rows[0].uuid + '"' in page
    assert f"previous: run {rec.run_id}" in page
