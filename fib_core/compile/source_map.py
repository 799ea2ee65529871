"""Map paths of the solution's private build copy back to the contestant's own files.

A Python/Triton solution is imported from a temporary package
(``<tmp>/fib-py-XXXX/fib_solution_<hash>_<pid>_<n>/kernel.py``), so its tracebacks, Triton
compile errors and sanitizer reports name that copy. A contestant must read
``solution/triton/kernel.py:42`` instead: the file they edit. Paths are rewritten in logs after
the run (the copy is gone by then anyway); without a known source folder they become relative
to the solution (``kernel.py``), as the compiler diagnostics of CUDA builds already are.

Example::

    map_solution_paths('File "/tmp/fib-py-ab12/fib_solution_9f_77_1/kernel.py", line 42',
                       "solution/triton")
    # -> 'File "solution/triton/kernel.py", line 42'
"""

from __future__ import annotations

import re

# The Python builder's copy: <any dir>/fib-py-<random>/fib_solution_<hash>_<pid>_<counter>/
_PY_COPY = re.compile(
    r"(?:[A-Za-z]:)?[^\s\"'():]*?/fib-py-[^/\s\"']+/fib_solution_[0-9a-f]+_\d+_\d+/"
)
# A native build's copy of the sources: <cache>/builds/<hash>/<key or .tmp-...>/src/
_NATIVE_COPY = re.compile(r"[^\s\"'():]*?/builds/[0-9a-f]{8,}/[^/\s\"']+/src/")
# The same package's dotted module name, as Triton and importlib print it.
_PY_MODULE = re.compile(r"\bfib_solution_[0-9a-f]+_\d+_\d+\.")


def in_build_copy(path: str) -> bool:
    """Whether ``path`` is a file of a solution's private build copy (its own source file).

    >>> in_build_copy("/tmp/fib-py-ab12/fib_solution_9f_77_1/kernel.py")
    True
    """
    return bool(_PY_COPY.search(path) or _NATIVE_COPY.search(path))


def map_solution_paths(text: str, source_dir: str | None = None) -> str:
    """``text`` with every build-copy path replaced by ``source_dir`` (or made relative)."""
    if not text or ("fib_solution_" not in text and "/builds/" not in text):
        return text
    prefix = "" if not source_dir else source_dir.rstrip("/") + "/"
    text = _PY_COPY.sub(lambda _m: prefix, text)
    text = _NATIVE_COPY.sub(lambda _m: prefix, text)
    return _PY_MODULE.sub("", text)


def map_trace_logs(traces: list, source_dir: str | None) -> None:
    """Rewrite each trace's evaluation log in place (the JSON and the table then agree)."""
    for trace in traces:
        ev = getattr(trace, "evaluation", None)
        if ev is not None and isinstance(getattr(ev, "log", None), str):
            ev.log = map_solution_paths(ev.log, source_dir)
