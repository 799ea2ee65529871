"""Milestones of a run's processes on one clock, for measuring where a run's start goes.

Off unless ``FIB_TIMELINE`` names a file (``benchmarks/bench_turnaround.py --timeline`` sets
it); then each process of the run (launcher, GPU processes, judges, workers) appends lines
``<CLOCK_MONOTONIC seconds> <pid> <role> <milestone>`` to it, and the benchmark prints them
per process, relative to the run's start. The file is opened at a process's first mark, which
a worker makes before its sandbox closes, so its later marks still reach it. For measuring
the harness only: a solution could write to that file.
"""

from __future__ import annotations

import os
import time

TIMELINE_VAR = "FIB_TIMELINE"
# The open file and this process's pid when it made its first mark: a worker's later marks
# come from inside its sandbox's PID namespace, where its pid reads differently.
_open: list[int] = []


def mark(role: str, milestone: str) -> None:
    """Append this process's ``milestone`` (no spaces needed) under ``role``; nothing unless
    ``FIB_TIMELINE`` is set. Example: ``mark("worker", "ready")``."""
    path = os.environ.get(TIMELINE_VAR)
    if not path:
        return
    if not _open:  # tried once: a file that could not be opened (a sandbox's later view of
        # it included) is not tried again; non-blocking, so a FIFO with no reader never waits
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            _open.extend((os.open(path, flags, 0o600), os.getpid()))
        except OSError:
            _open.extend((-1, os.getpid()))
    if _open[0] < 0:
        return
    line = f"{time.monotonic():.4f} {_open[1]} {role} {milestone}\n"
    try:
        os.write(_open[0], line.encode())  # one small append: whole, whatever else writes
    except OSError:  # measuring only: a run never fails for it
        pass


def read(path: str | os.PathLike[str], since: float) -> list[tuple[float, int, str, str]]:
    """The marks in ``path`` made at or after ``since`` (a ``time.monotonic()`` value), as
    (seconds after ``since``, pid, role, milestone), in time order."""
    rows = []
    try:
        text = open(path, encoding="utf-8", errors="replace").read()  # noqa: SIM115
    except OSError:
        return []
    for line in text.splitlines():
        parts = line.split(" ", 3)
        if len(parts) != 4:
            continue
        try:
            at, pid = float(parts[0]), int(parts[1])
        except ValueError:
            continue
        if at >= since:
            rows.append((at - since, pid, parts[2], parts[3]))
    return sorted(rows)


def format_timeline(rows: list[tuple[float, int, str, str]]) -> list[str]:
    """One line per process: its role and pid, then each milestone with its time (s)."""
    order: list[tuple[int, str]] = []
    marks: dict[tuple[int, str], list[str]] = {}
    for at, pid, role, milestone in rows:
        key = (pid, role)
        if key not in marks:
            order.append(key)
            marks[key] = []
        marks[key].append(f"{milestone} {at:.2f}")
    return [f"{role:>10} {pid:>7}: " + ", ".join(marks[(pid, role)]) for pid, role in order]


def memory_milestone(prefix: str) -> str:
    """``prefix`` and this process's resident and locked memory (``leave-rss812M-lck0M``), read
    only while the timeline is on: what a process's exit has to tear down.

    >>> memory_milestone("leave").startswith("leave")
    True
    """
    if not os.environ.get(TIMELINE_VAR):
        return prefix
    sizes = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmLck", "VmPin"):
                    sizes[key[2:].lower()] = int(rest.split()[0]) // 1024
    except (OSError, ValueError):
        return prefix
    return "-".join([prefix, *(f"{k}{v}M" for k, v in sizes.items())])
