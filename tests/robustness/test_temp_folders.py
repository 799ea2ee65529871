"""Code that never calls close() (the organizers' scripts have no such call) leaves nothing in
the system's temporary folder once its process exits."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(sys.argv[1]) / "examples" / "porting"))
    import make_tiny_dataset

    from fib_core.bench import Benchmark
    from fib_core.compile import get_registry
    from fib_core.data import TraceSet

    ts = TraceSet.from_path(make_tiny_dataset.make(Path(sys.argv[2])))
    definition = ts.definitions["tiny_scaled_add"]
    built = get_registry().build(definition, ts.get_solution("tiny_returning"))  # never closed
    bench = Benchmark(ts, log_level="ERROR")                                      # never closed
    print(sorted(p.name for p in Path(sys.argv[3]).iterdir()))
    """
)


@pytest.mark.slow
def test_unclosed_builds_and_benchmarks_leave_no_temporary_folder(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(REPO), str(tmp_path / "dataset"), str(tmp)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    made = done.stdout.strip()
    assert "fib-py-" in made and "fib-bench-logs-" in made, made  # they existed while it ran
    assert list(tmp.iterdir()) == []
