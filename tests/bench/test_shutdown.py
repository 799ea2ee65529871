"""The end of a run: the worker and the judge are asked to close together and leave at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fib_core.bench.engine import pool

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def test_a_child_told_to_close_flushes_its_output_and_exits_at_once() -> None:
    done = _python("from fib_core.bench.evaluation.worker import _leave\n"
                   "print('flushed', end='')\n_leave('worker')\nprint('not reached')")
    assert done.returncode == 0 and done.stdout == "flushed"


def test_under_a_profiler_the_child_returns_so_its_profile_is_written() -> None:
    done = _python("import sys\nfrom fib_core.bench.evaluation.worker import _leave\n"
                   "sys.setprofile(lambda *a: None)\nr = _leave('judge')\nsys.setprofile(None)\n"
                   "print('returned', r)")
    assert done.returncode == 0 and done.stdout.strip() == "returned 0"


def test_under_cprofile_the_child_returns_too(tmp_path) -> None:
    """cProfile (sys.monitoring from Python 3.12 on) is seen as well: its stats get written."""
    out = tmp_path / "child.prof"
    script = tmp_path / "child.py"
    script.write_text("from fib_core.bench.evaluation.worker import _leave\nprint('returned', _leave('worker'))\n")
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), str(script)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and done.stdout.strip() == "returned 0" and out.stat().st_size


class _Proc:
    def __init__(self, name: str, log: list, exits: bool) -> None:
        self.name, self.log, self.exits = name, log, exits

    def wait(self, timeout: float) -> int:
        self.log.append(("wait", self.name))
        if not self.exits:
            raise subprocess.TimeoutExpired("child", timeout)
        return 0


class _Handle:
    def __init__(self, name: str, log: list, alive: bool = True, exits: bool = True) -> None:
        self.name, self.log, self.alive = name, log, alive
        self.role = name
        self.proc = _Proc(name, log, exits)

    def _ask_to_close(self) -> bool:
        self.log.append(("ask", self.name))
        return self.alive

    def kill(self) -> None:
        self.log.append(("kill", self.name))


def test_every_child_is_asked_before_any_is_waited_for_and_all_are_killed_after() -> None:
    log: list = []
    worker, judge = _Handle("worker", log), _Handle("judge", log, exits=False)
    gone = _Handle("gone", log, alive=False)  # died earlier: not waited for, still reaped
    pool.close_all([worker, None, judge, gone])
    assert log == [
        ("ask", "worker"), ("ask", "judge"), ("ask", "gone"),
        ("wait", "worker"), ("wait", "judge"),
        ("kill", "worker"), ("kill", "judge"), ("kill", "gone"),
    ]
