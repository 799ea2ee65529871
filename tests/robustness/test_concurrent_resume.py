"""Two ``--resume`` runs of one solution on one dataset: every pair measured exactly once.

The test holds the run lock itself until both runs are waiting on it (both have loaded the
dataset by then, so without the lock each would measure every pair), then lets them go.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from fib_core.data.json_io import iter_jsonl

from .conftest import REPO, solution, workload

WAITING = "waiting for it to finish, then resuming after it"


def _start(root: Path, cwd: Path, out: Path, cache: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "FIB_CACHE_DIR": str(cache)}
    with out.open("w") as fh:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fib_core",
                "run",
                "--local",
                str(root),
                "--resume",
                "--device",
                "cpu",
            ],
            cwd=cwd,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
        )


def test_concurrent_resume_runs_share_the_work(tmp_path, make_dataset, cache_dir):
    uuids = ["w-1", "w-2", "w-3"]
    root = make_dataset(solutions=[solution()], workloads=[workload(u) for u in uuids])
    lock_path = root / "traces" / ".toy_add.sol.lock"
    lock_path.parent.mkdir(parents=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    procs = [_start(root, tmp_path, log, cache_dir) for log in logs]
    try:
        deadline = time.monotonic() + 120
        while not all(WAITING in log.read_text() for log in logs):
            assert time.monotonic() < deadline, [log.read_text() for log in logs]
            assert all(p.poll() is None for p in procs), [log.read_text() for log in logs]
            time.sleep(0.2)
    finally:
        os.close(fd)  # let them go
    codes = [p.wait(timeout=180) for p in procs]
    outputs = [log.read_text() for log in logs]
    assert codes == [0, 0], outputs
    records = [raw for f in (root / "traces").rglob("toy_add.jsonl") for _, raw in iter_jsonl(f)]
    assert Counter(r["workload"]["uuid"] for r in records) == Counter(uuids)
    # One run measured the three pairs, the other found them done.
    skipped = sorted(out.count("skipped (already measured)") for out in outputs)
    assert skipped == [0, 3], outputs
