"""The command line and search path a worker or judge process is started with.

What a child imports is decided here: the kit's own ``fib_core`` first, never the current
folder (a module a solution left there would be imported in place of the real one), and the
interpreter's ``-P`` keeps that so. :class:`fib_core.bench.engine.pool.WorkerHandle` launches
the process; its environment is :meth:`~fib_core.bench.engine.pool.WorkerHandle.child_env`.

Example (the command of a sandboxed CPU worker on file descriptor 5)::

    args = child_command("worker", "cpu", 5, token=token, mounts=Mounts())
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from fib_core.bench.containment.mounts import Mounts
from fib_core.paths import PROFILE_ENV, kit_root


def child_pythonpath(inherited: str) -> str:
    """The child's PYTHONPATH given ours (``inherited``): the kit's root, then our absolute
    entries."""
    # The kit's own fib_core first (its folder is read-only to solutions); the current
    # folder, where `python -m` would have put it, is not on the path at all: a module a
    # solution left there (json.py) would be imported in place of the real one. User
    # modules named in generator_modules are looked up there alone (worker.py).
    # The user's own entries follow, but not an empty or relative one: Python reads it
    # as the current folder.
    user = [p for p in inherited.split(os.pathsep) if os.path.isabs(p)]
    return os.pathsep.join(dict.fromkeys([str(kit_root()), *user]))


def child_command(role: str, device: str, fd: int, *, token: str, mounts: Mounts,
                  trusted: bool = False, context_at_start: bool = False) -> list[str]:
    """The argument list of a ``role`` process ("worker" or "judge") on ``device`` that talks
    to us over the socket ``fd``; ``token`` names its cProfile output when the harness is
    being measured (``FIB_PROFILE_WORKERS``)."""
    # -P: the current folder does not go first on sys.path, so a fib_core there (another
    # fork's, an old copy) cannot stand in for this process's own. (The per-user
    # site-packages stays: torch may be installed there; workers see it read-only.)
    args = [sys.executable, "-P", "-m", "fib_core.bench.evaluation.worker", "--fd", str(fd),
            "--device", device, "--role", role,
            "--parent", str(os.getpid())]
    profile_dir = os.environ.get(PROFILE_ENV)
    if profile_dir:  # measuring the harness: each process's cProfile stats, on exit
        out = Path(profile_dir) / f"{role}-{token[:8]}.prof"
        args[2:2] = ["-m", "cProfile", "-o", str(out)]
    args += mounts.args()
    if trusted:
        args.append("--trusted")
    if context_at_start and role == "worker":
        args.append("--context-at-start")
    return args
