"""scripts/run_local.py end to end on the embedded default dataset (CPU smoke run here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def run_local(repo_root: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="160", PYTHONUNBUFFERED="1")
    env.pop("FIB_DATASET_PATH", None)
    return subprocess.run(
        [sys.executable, str(repo_root / "scripts" / "run_local.py"), *args],
        capture_output=True, text=True, cwd=cwd or repo_root, env=env, timeout=900,
    )


@pytest.fixture(scope="module")
def first_run(repo_root: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("run") / "base.json"
    proc = run_local(repo_root, "--json", str(out))
    return proc, out


def test_default_starter_passes_with_table_summary_and_exit_0(first_run) -> None:
    proc, out = first_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = proc.stdout
    import torch

    if not torch.cuda.is_available():
        assert "CPU smoke run" in text and "correctness only" in text
        assert "Ran 3 of 54 workloads (quick subset, CPU smoke: correctness only)" in text
        assert "Score" not in text and "No score" in text
        # the reference is not timed on the CPU: unknown, not a 0.00x speedup
        assert "0.00x" not in text and "0.00 us" not in text
        assert all(r["speedup"] is None and r["reference_latency_ms"] is None
                   for r in json.loads(out.read_text())["rows"])
    else:
        assert "Score: " in text
    for column in ("status", "latency", "speedup", "roofline"):
        assert column in text
    assert "Passed: " in text
    data = json.loads(out.read_text())
    rows = data["rows"]
    assert rows and all(r["status"] == "PASSED" for r in rows)
    assert data["definition"] == "gdn_decode_qk4_v8_d128_k_last"
    assert data["author"] == "your-team"


def test_compare_with_a_previous_run(repo_root: Path, first_run, tmp_path: Path) -> None:
    """A previous run 1000x slower on batch 1 reads as faster there; the workloads this run
    left out read as missing, each named."""
    _, base = first_run
    previous = json.loads(base.read_text())
    rows = previous["rows"]
    batch1 = [r for r in rows if r["axes"].get("batch_size") == 1]
    others = [r for r in rows if r["axes"].get("batch_size") != 1]
    assert len(batch1) == 1 and others
    row = batch1[0]
    row["latency_ms"] *= 1000
    for key in ("p10_ms", "p90_ms", "min_ms"):
        if row.get("spread") and row["spread"].get(key) is not None:
            row["spread"][key] *= 1000
    slower_before = tmp_path / "previous.json"
    slower_before.write_text(json.dumps(previous))
    proc = run_local(repo_root, "--compare", str(slower_before), "--workloads", "acfd1138",
                     "--wide")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = [line for line in proc.stdout.splitlines() if "Compared with previous:" in line]
    assert len(summary) == 1, proc.stdout[-3000:]
    # A GPU run has a spread to judge by; a CPU smoke run times once and gives no verdict.
    assert "1 faster" in summary[0] or "1 one sample, no verdict" in summary[0], summary[0]
    assert f"{len(others)} missing" in summary[0] and "slower" not in summary[0], summary[0]
    assert "-99." in proc.stdout  # the change column: about -99.9 %
    for r in others:
        assert f"{r['uuid'][:8]} was in the previous run but not in this one" in proc.stdout


def test_failing_kernel_gives_reason_and_exit_1(repo_root: Path, tmp_path: Path) -> None:
    """A kernel that leaves its output unwritten: INCORRECT_NUMERICAL with a reason, exit 1."""
    src = repo_root / "solution" / "triton" / "kernel.py"
    fork = tmp_path / "fork"
    (fork / "solution" / "triton").mkdir(parents=True)
    text = src.read_text()
    # Keep the real kernel for new_state, but never write `output`.
    text += "\n\n_real_run = run\n\ndef run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):\n"
    text += "    scratch = output.clone()\n"
    text += "    _real_run(q, k, v, state, A_log, a, dt_bias, b, scale, scratch, new_state)\n"
    (fork / "solution" / "triton" / "kernel.py").write_text(text)
    (fork / "config.toml").write_text((repo_root / "config.toml").read_text())
    proc = run_local(repo_root, "--config", str(fork / "config.toml"), "--workloads", "acfd1138")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "INCORRECT_NUMERICAL" in proc.stdout
    assert "Passed: 0/1" in proc.stdout


def test_user_error_is_one_line_exit_2(repo_root: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text((repo_root / "config.toml").read_text().replace(
        'definition = "gdn_decode_qk4_v8_d128_k_last"', 'definition = "gdn_decode_qk4"'))
    proc = run_local(repo_root, "--config", str(cfg))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "closest: gdn_decode_qk4_v8_d128_k_last" in lines[0], proc.stderr


def test_traceback_names_the_contestants_file(repo_root: Path, tmp_path: Path) -> None:
    """A kernel that raises: the log points at solution/triton/kernel.py, reason shown once."""
    fork = tmp_path / "fork"
    (fork / "solution" / "triton").mkdir(parents=True)
    (fork / "solution" / "triton" / "kernel.py").write_text(
        "def run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):\n"
        "    raise IndexError('planted failure')\n"
    )
    (fork / "config.toml").write_text((repo_root / "config.toml").read_text())
    proc = run_local(repo_root, "--config", str(fork / "config.toml"), "--workloads",
                     "acfd1138", cwd=fork)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert 'File "solution/triton/kernel.py", line 2' in proc.stdout
    assert "fib-py-" not in proc.stdout
    assert proc.stdout.count("IndexError: planted failure") == 1
