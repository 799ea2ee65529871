"""How an evaluation ends early: a status, and a log a contestant can act on.

Anything a solution does wrong, at any phase of :mod:`.evaluator`, ends as :class:`Failed`
with the trace status it earns; only a broken CUDA context marks it ``fatal``, so the engine
replaces the worker. The log keeps the solution's frames and drops the kit's own.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any

from fib_core.data.trace import EvaluationStatus

TRACEBACK_LINES = 25
# The kit's own code (fib_core/): its frames say nothing a contestant can act on.
_KIT_DIR = str(Path(__file__).resolve().parents[2])


class Failed(Exception):
    """Ends an evaluation early with a status (raised inside, caught by
    :meth:`.evaluator.Evaluator.evaluate`)."""

    def __init__(
        self, status: EvaluationStatus, log: str, correctness: Any = None, fatal: bool = False
    ):
        super().__init__(log)
        self.status, self.log, self.correctness, self.fatal = status, log, correctness, fatal


def solution_traceback() -> str:
    """The current exception's traceback without the kit's own frames (the solution's and the
    libraries' frames are what a contestant can act on)."""
    exc_type, exc, tb = sys.exc_info()
    frames = traceback.extract_tb(tb)
    kept = [f for f in frames if not f.filename.startswith(_KIT_DIR)] or frames
    lines = [
        "Traceback (most recent call last):\n",
        *traceback.format_list(kept),
        *traceback.format_exception_only(exc_type, exc),
    ]
    return tail("".join(lines))


def tail(text: str, lines: int = TRACEBACK_LINES) -> str:
    """The last ``lines`` lines of ``text`` (an elision mark before them when cut)."""
    parts = text.rstrip().splitlines()
    if len(parts) > lines:
        parts = ["..."] + parts[-lines:]
    return "\n".join(parts)


def also(message: str) -> str:
    """``message`` as a note after another one (nothing when it is empty)."""
    return f"; also: {message}" if message else ""
