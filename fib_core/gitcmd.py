"""Running git: the kit's one wrapper around the ``git`` command.

Used to tag a submission (:mod:`fib_core.project.tagging`) and to note the commit a run was
measured at (:mod:`fib_core.report.ledger`). Every call has a deadline, so a git waiting on a
lock or a credential prompt cannot hang the kit.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from fib_core.errors import FibError


class GitError(FibError):
    """A git command failed; the message carries git's own first line."""


def git(
    root: Path,
    *args: str,
    env: dict[str, str] | None = None,
    data: str | None = None,
    timeout_s: float = 60.0,
) -> str:
    """Run ``git -C root args...`` and return its stdout stripped; GitError on failure."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            input=data,
            timeout=timeout_s,
            env={**os.environ, **(env or {})},
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as err:
        raise GitError(f"git {args[0]}: {err}") from None
    if out.returncode != 0:
        first = (out.stderr.strip() or out.stdout.strip() or "failed").splitlines()[0]
        hint = ""
        if "tell me who you are" in out.stderr or "user.email" in out.stderr:
            hint = (
                "; set an identity first: git config user.name 'Your Name' && "
                "git config user.email you@example.com"
            )
        raise GitError(f"git {' '.join(args[:2])}: {first}{hint}")
    return out.stdout.strip()
