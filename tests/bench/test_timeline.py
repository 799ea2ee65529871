"""The start-up timeline: off by default, one clock for every process, a line per process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from fib_core.bench.evaluation import timeline

ROOT = Path(__file__).resolve().parents[2]


def test_marks_are_off_unless_a_file_is_named(monkeypatch):
    monkeypatch.delenv(timeline.TIMELINE_VAR, raising=False)
    monkeypatch.setattr(timeline, "_open", [])
    timeline.mark("worker", "ready")
    assert timeline._open == []  # nothing opened, nothing to write to


def test_a_file_that_cannot_be_opened_is_tried_once_and_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(timeline, "_open", [])
    monkeypatch.setenv(timeline.TIMELINE_VAR, str(tmp_path / "missing" / "timeline.txt"))
    timeline.mark("worker", "start")
    (tmp_path / "missing").mkdir()  # there now, as after a sandbox changed the view
    timeline.mark("worker", "ready")
    assert timeline._open[0] == -1 and not (tmp_path / "missing" / "timeline.txt").exists()


def test_processes_marks_share_one_clock_and_group_by_process(tmp_path):
    path = tmp_path / "timeline.txt"
    since = time.monotonic()
    env = {**os.environ, timeline.TIMELINE_VAR: str(path),
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    code = ("import time; from fib_core.bench.evaluation.timeline import mark; "
            "mark('{role}', 'start'); time.sleep(0.2); mark('{role}', 'ready')")
    children = [subprocess.Popen([sys.executable, "-c", code.format(role=role)], env=env)
                for role in ("judge", "worker")]
    assert [c.wait(timeout=60) for c in children] == [0, 0]
    path.write_text(path.read_text() + "garbage line\n1.0 x worker bad\n")
    rows = timeline.read(path, since)
    assert sorted((role, m) for _, _, role, m in rows) == [
        ("judge", "ready"), ("judge", "start"), ("worker", "ready"), ("worker", "start")]
    assert all(0 <= at < 60 for at, *_ in rows) and rows == sorted(rows)
    by_role = {role: [at for at, _, r, _ in rows if r == role] for role in ("judge", "worker")}
    assert all(later - first >= 0.2 for first, later in by_role.values())
    lines = timeline.format_timeline(rows)
    assert len(lines) == 2 and all("start" in line and "ready" in line for line in lines)
    assert timeline.read(path, time.monotonic() + 1) == []  # marks before ``since`` are left out
