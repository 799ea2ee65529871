"""Turn a failed build's output into the few compiler lines a contestant needs.

A failed nvcc/ninja run prints the full command lines (kilobytes of flags), warnings and
notes; the organizers' tool shows a Python traceback around it. We keep the lines that carry
an error *and* a source location (``kernel.cu(12): error: ...``, ``main.cpp:3:5: error: ...``),
strip the private build folder from paths so they read as the contestant's own files, and cap
the count. The full output is saved beside the cache so nothing is lost.
"""

from __future__ import annotations

import re
from pathlib import Path

from fib_core.errors import BuildError

MAX_LINES = 20
MAX_LINE_CHARS = 300

# file.ext:LINE (gcc/clang/python) or file.ext(LINE) (nvcc).
_LOCATION = re.compile(r"[\w.+\-/\\]+\.(?:cu|cuh|cpp|cc|cxx|c|h|hpp|hh|hxx|inl|py|o|so)(?::\d+|\(\d+\))")
_ERROR = re.compile(r"error|undefined reference|undefined symbol|multiple definition", re.I)
# Lines that mention "error" only as part of a command or a summary of other lines.
_NOISE = re.compile(r"^(FAILED:|\[\d+/\d+\]|ninja: |c\+\+ |g\+\+ |.*/nvcc |.*\bnvcc\s+-)")


def error_lines(output: str, strip_prefixes: tuple[str, ...] = (), limit: int = MAX_LINES) -> list[str]:
    """The compiler's error lines from ``output``, trimmed; a tail of the output if none match.

    Order of preference: error lines with a location, then any error line, then the last
    non-empty lines (a build tool that failed before compiling, e.g. a version check).
    """
    lines = [_clean(line, strip_prefixes) for line in output.splitlines()]
    lines = [line for line in lines if line]
    errors = [line for line in lines if _ERROR.search(line) and not _NOISE.match(line)]
    located = [line for line in errors if _LOCATION.search(line)]
    picked = located or errors or lines[-limit:]
    picked = list(dict.fromkeys(picked))  # drop repeats, keep order
    if len(picked) > limit:
        hidden = len(picked) - limit
        picked = picked[:limit] + [f"... and {hidden} more error lines"]
    return picked


def _clean(line: str, strip_prefixes: tuple[str, ...]) -> str:
    line = line.rstrip()
    for prefix in strip_prefixes:
        if prefix:
            line = line.replace(prefix.rstrip("/") + "/", "")
    if len(line) > MAX_LINE_CHARS:
        line = line[: MAX_LINE_CHARS - 3] + "..."
    return line


def compile_error(
    summary: str,
    output: str,
    *,
    strip_prefixes: tuple[str, ...] = (),
    log_path: Path | None = None,
) -> BuildError:
    """A BuildError whose first line is ``summary`` and whose next lines are the compiler's.

    The first line stands alone (scripts that print one line still say what failed); the
    attribute ``compiler_lines`` holds the trimmed lines for the COMPILE_ERROR trace log, and
    ``log_path`` the saved full output when it could be written.
    """
    picked = error_lines(output, strip_prefixes)
    if log_path is not None:
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log_path.write_text(output, encoding="utf-8")
            summary += f" (full log: {log_path})"
        except OSError:
            log_path = None
    err = BuildError("\n".join([summary, *("  " + line for line in picked)]))
    err.compiler_lines = picked  # type: ignore[attr-defined]
    err.log_path = log_path  # type: ignore[attr-defined]
    return err
