"""``run_local.py --watch``: run again each time the solution or config.toml changes.

Between runs the next run's processes (judge and first worker; on several GPUs, each GPU's
process with its own) are started and left waiting, so a run after an edit skips what a
fresh command pays before its first workload (Python, torch, the CUDA context, Triton's
start: about 2 s on an H200 machine). They are fresh processes: no solution code has run in
them. Ctrl-C stops the watch; the waiting processes stop with it.

Example::

    watch(run_once, lambda: [Path("config.toml"), Path("solution/triton")], prestart, print)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from stat import S_ISREG

from fib_core.errors import FibError
from fib_core.project.pack import excluded_dir, packable

POLL_S = 0.25  # how often the files are looked at while waiting
SETTLE_S = 0.3  # an editor's save is often several writes: wait until they stop

Snapshot = dict[str, tuple[int, int]]


def snapshot(paths: Sequence[Path], ignore: Sequence[Path] = ()) -> Snapshot:
    """(mtime in ns, size) of each watched file: ``paths`` are files or folders; in a folder,
    the files a solution packs (:func:`fib_core.project.pack.packable`; build outputs,
    caches and hidden folders are not even walked), so what a run writes there does not
    start another. ``ignore``: files or folders left out (the run's own outputs, such as a
    ``--json`` file placed under ``solution/``). A folder that vanishes or cannot be read
    while it is walked is skipped: the next look sees what is there.

    >>> snapshot([Path("no/such/file")])
    {}
    """
    skip = {Path(os.path.abspath(p)) for p in ignore}

    def ignored(path: Path) -> bool:
        full = Path(os.path.abspath(path))
        return any(full == s or s in full.parents for s in skip)

    seen: Snapshot = {}
    for root in paths:
        if root.is_dir():
            files = []
            for folder, dirs, names in os.walk(root):  # errors (a vanished folder): skipped
                dirs[:] = [d for d in dirs if not excluded_dir(d)]
                here = Path(folder)
                files += [here / n for n in names if packable((here / n).relative_to(root))]
        else:
            files = [root]
        for path in files:
            if ignored(path):
                continue
            try:
                stat = path.stat()
            except OSError:  # gone between the listing and the look
                continue
            if S_ISREG(stat.st_mode):
                seen[str(path)] = (stat.st_mtime_ns, stat.st_size)
    return seen


def wait_for_change(watched: Callable[[], Sequence[Path]], since: Snapshot,
                    sleep: Callable[[float], None] = time.sleep,
                    ignore: Sequence[Path] = ()) -> Snapshot:
    """Block until the watched files differ from ``since`` and then stay the same for
    :data:`SETTLE_S`; the new snapshot."""
    while True:
        now = snapshot(watched(), ignore)
        if now != since:
            break
        sleep(POLL_S)
    while True:  # let the save finish
        sleep(SETTLE_S)
        later = snapshot(watched(), ignore)
        if later == now:
            return now
        now = later


def watch(run_once: Callable[[], int], watched: Callable[[], Sequence[Path]],
          prestart: Callable[[], None], say: Callable[[str], None],
          runs: int | None = None, sleep: Callable[[float], None] = time.sleep,
          ignore: Sequence[Path] = ()) -> int:
    """Run, then start the next run's processes and wait for a change, again and again.

    ``run_once``: one run, its exit status; a user mistake it raises (:class:`FibError`: a
    broken config.toml, a syntax error the packer finds) is printed as one line and the
    watch goes on. ``watched``: the files and folders to watch, asked again after each run (a
    config edit may name another solution folder). ``prestart``: starts the next run's
    processes. ``runs``: stop after that many (tests); None runs until Ctrl-C. ``ignore``:
    what the runs write themselves (see :func:`snapshot`). Returns the last run's exit
    status."""
    code = 0
    done = 0
    while True:
        before = snapshot(watched(), ignore)  # first: an edit during the run starts the next
        try:
            code = run_once()
        except FibError as err:
            say(f"error: {err}")
            code = 2
        done += 1
        if runs is not None and done >= runs:
            return code
        prestart()
        names = ", ".join(str(p) for p in watched())
        say(f"watching {names}: save a change to run again, Ctrl-C to stop")
        after = wait_for_change(watched, before, sleep, ignore)
        say(f"changed: {describe_change(before, after)}")


def describe_change(before: Snapshot, after: Snapshot) -> str:
    """The files that changed, for the line before the next run.

    >>> describe_change({"a.py": (1, 1)}, {"a.py": (2, 1), "b.py": (2, 1)})
    'a.py, b.py (new)'
    """
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    names = [p + (" (new)" if p not in before else " (removed)" if p not in after else "")
             for p in changed]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
