"""Shared start-up of the scripts: user errors as one line, no traceback.

Example::

    from fib_core.project.entry import run_script
    def main(argv=None) -> int: ...
    if __name__ == "__main__":
        run_script(main)
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from fib_core.errors import FibError, FibWarning

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


def _kit_warning_as_one_line(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001, ANN202
    """The kit's own warnings (:class:`FibWarning`) as ``warning: <message>`` (its message
    names the file and what to do); others in Python's default form."""
    if issubclass(category, FibWarning):
        print(f"warning: {message}", file=file or sys.stderr)
    else:
        _default_showwarning(message, category, filename, lineno, file, line)


_default_showwarning = warnings.showwarning


def run_script(main: Callable[[], int | None]) -> NoReturn:
    """Call ``main``; a :class:`FibError` prints ``error: <message>`` and exits with 2, and
    the kit's warnings print as one ``warning: ...`` line each."""
    warnings.showwarning = _kit_warning_as_one_line
    try:
        code = main() or 0
    except FibError as err:
        print(f"error: {err}", file=sys.stderr)
        code = EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    sys.exit(code)


def display_path(path: str | Path) -> str:
    """``path`` relative to the current folder when it lies inside it (what a user typed)."""
    p = Path(path).resolve()
    try:
        return p.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(p)
