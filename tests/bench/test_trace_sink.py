"""When neither the dataset nor a fallback file takes the traces, the one line says what is true
for the command that printed it (``python -m fib_core run`` has no --json)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_fib_core_run_names_no_flag_it_lacks(make_dataset, tmp_path: Path) -> None:
    root = make_dataset(["correct"])
    (root / "traces").write_text("a file where the traces folder should be\n")
    cache, tmp = tmp_path / "cache", tmp_path / "tmp"
    cache.mkdir()
    tmp.mkdir()
    (cache / "unsaved-traces").write_text("")  # each fallback folder is a file: refused too
    (tmp / "fib_core-unsaved-traces").write_text("")
    env = dict(os.environ, FIB_CACHE_DIR=str(cache), TMPDIR=str(tmp), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, "-m", "fib_core", "run", "--local", str(root), "--device", "cpu",
         "--warmup-runs", "0", "--iterations", "1"],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )
    out = proc.stdout + proc.stderr
    assert "nor to a fallback file" in out, out[-3000:]
    assert "--json" not in out
    assert "free disk space or raise the file-size limit" in out
