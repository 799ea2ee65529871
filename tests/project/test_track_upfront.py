"""--track runs and packs check every definition before any work: nothing runs or is written
when one of them is wrong."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fib_core.project.switch import add_definition

DECODE = "gdn_decode_qk4_v8_d128_k_last"
PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
KIT = Path(__file__).resolve().parents[2]


@pytest.fixture
def track_fork(tmp_path: Path) -> Path:
    """A copy of the kit holding both GDN starters, the prefill one's entry point wrong."""
    root = tmp_path / "fork"
    root.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "runs")
    for part in ("fib_core", "scripts", "starters", "solution", "config.toml"):
        src = KIT / part
        if src.is_dir():
            shutil.copytree(src, root / part, ignore=skip)
        else:
            shutil.copy2(src, root / part)
    add_definition(root, PREFILL)
    config = root / "config.toml"
    text = config.read_text()
    table = text.index(f"[track.{PREFILL}]")
    config.write_text(text[:table] + text[table:].replace("kernel.py::run", "kernel.py::go"))
    return root


def _script(root: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1")
    env.pop("FIB_DATASET_PATH", None)
    return subprocess.run([sys.executable, str(root / "scripts" / name), *args], cwd=root,
                          capture_output=True, text=True, env=env, timeout=600, check=False)


def test_pack_track_writes_nothing_when_one_definition_is_wrong(track_fork: Path) -> None:
    proc = _script(track_fork, "pack_solution.py", "--track")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"[track.{PREFILL}] entry_point" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert list(track_fork.glob("solution*.json")) == [] and "wrote" not in proc.stdout


def test_run_track_runs_nothing_when_one_definition_is_wrong(track_fork: Path) -> None:
    proc = _script(track_fork, "run_local.py", "--track", "--quick")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"fix [track.{PREFILL}] entry_point" in proc.stderr
    assert DECODE not in proc.stdout and "PASSED" not in proc.stdout  # decode never started
    assert not (track_fork / "runs" / "ledger.jsonl").exists()
