"""Point a failing call of a solution at the contestant's own line, with Python's hint.

A Triton kernel that fails is rarely reported where it failed. The interpreter (a CPU smoke
run) wraps the error in ``InterpreterError(repr(err))`` raised from the launch, so the last
lines of the traceback are Triton's own; the compiler (on a GPU) wraps it in a
``CompilationError`` that gives the line within the kernel's function only. Python 3.11's
``traceback`` module does not add the "Did you mean ...?" hint that its interpreter prints for
an ``AttributeError`` or ``NameError`` either.

:func:`note_solution_error` adds a note (PEP 678) to the exception a call of the solution
raised: where in the solution's files the first error came from, that line, and the error
with the hint. Every traceback printed from then on (the benchmark's log and its table, an
``--inline`` run) ends with those lines, and paths of the private build copy are mapped to
``solution/...`` as for any log (:mod:`fib_core.compile.source_map`).

Example::

    try:
        runnable.run(inputs, outputs)
    except Exception as err:
        note_solution_error(err)  # err.__notes__[-1] ends "Did you mean: 'program_id'?"
        raise
"""

from __future__ import annotations

import builtins
import difflib
import linecache
import sys
import traceback
from types import TracebackType
from typing import Any

from .source_map import in_build_copy

NOTE_HEAD = "in your code:"
_MAX_CHAIN = 10


def note_solution_error(err: BaseException) -> None:
    """Add the note of :func:`describe` to ``err`` (once; nothing when it has nothing to add)."""
    if any(str(n).startswith(NOTE_HEAD) for n in getattr(err, "__notes__", ())):
        return
    try:
        text = describe(err)
    except Exception:  # never let the explanation hide the error itself
        return
    if text:
        err.add_note(text)


def describe(err: BaseException) -> str | None:
    """The lines that say where the solution's first error is and what it is, or None when
    the traceback already says it all (an error raised by the solution's own Python line,
    without a hint to add)."""
    chain = _chain(err)
    compiled = next((e for e in reversed(chain) if _is_compilation_error(e)), None)
    if compiled is not None:
        return _describe_compilation(compiled)
    root = next((e for e in reversed(chain) if _solution_frames(e.__traceback__)), None)
    if root is None:
        return None
    frame = _solution_frames(root.__traceback__)[-1]
    hint = _missing_hint(root, _last_frame(root.__traceback__))
    if root is err and not hint:
        return None
    return _note(f'File "{frame.filename}", line {frame.lineno}, in {frame.name}',
                 frame.line or "", _error_line(root) + hint)


def suggestion(err: BaseException, frame: Any = None) -> str:
    """Python's "Did you mean" for an AttributeError (the object's names) or a NameError (the
    frame's names and the builtins), as ``". Did you mean: 'x'?"``; "" when none is close.

    >>> import math
    >>> try:
    ...     math.sqr
    ... except AttributeError as e:
    ...     suggestion(e)
    ". Did you mean: 'sqrt'?"
    """
    name = getattr(err, "name", None)
    if not isinstance(name, str):
        return ""
    if isinstance(err, AttributeError):
        obj = getattr(err, "obj", None)
        if obj is None:
            return ""
        try:
            options = dir(obj)
        except Exception:
            return ""
    elif isinstance(err, NameError) and frame is not None:
        options = [*frame.f_locals, *frame.f_globals, *dir(builtins)]
    else:
        return ""
    close = difflib.get_close_matches(name, [o for o in options if o != name], n=1, cutoff=0.6)
    return f". Did you mean: '{close[0]}'?" if close else ""


def _missing_hint(err: BaseException, frame: Any = None) -> str:
    """:func:`suggestion`, unless the error's own line has it (Python 3.12's traceback module
    adds it there itself)."""
    return "" if "Did you mean" in _error_line(err) else suggestion(err, frame)


def _chain(err: BaseException) -> list[BaseException]:
    """``err`` and the exceptions it was raised from or during, outermost first."""
    out: list[BaseException] = []
    cur: BaseException | None = err
    while cur is not None and cur not in out and len(out) < _MAX_CHAIN:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def _solution_frames(tb: TracebackType | None) -> list[traceback.FrameSummary]:
    return [f for f in traceback.extract_tb(tb) if in_build_copy(f.filename)]


def _last_frame(tb: TracebackType | None) -> Any:
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame if tb is not None else None


def _is_compilation_error(err: BaseException) -> bool:
    return any(c.__name__ == "CompilationError" and c.__module__.startswith("triton")
               for c in type(err).__mro__)


def _describe_compilation(err: BaseException) -> str | None:
    """Triton's compiler error as the file's own line: the kernel's file and ``def`` line come
    from the code generator that raised it or, once Triton has cut its own frames out of the
    traceback (it does on the way out of ``triton.compile``), from the solution's jitted
    function whose source the error carries; the error's node gives the line within it."""
    node = getattr(err, "node", None)
    if not hasattr(node, "lineno"):
        return None
    located = _generator_location(err) or _jit_location(getattr(err, "src", None))
    if located is None:
        return None
    file, begin, name = located
    line = begin + node.lineno
    cause = err.__cause__ or err.__context__
    if cause is not None and not _is_compilation_error(cause):
        what = _error_line(cause) + _missing_hint(cause)
    else:
        what = str(getattr(err, "error_message", None) or type(err).__name__)
    return _note(f'File "{file}", line {line}, in {name}', linecache.getline(file, line), what)


def _generator_location(err: BaseException) -> tuple[str, int, str] | None:
    """(file, line before the ``def``, name) from the code generator of the last frame."""
    frame = _last_frame(err.__traceback__)
    generator = frame.f_locals.get("self") if frame is not None else None
    file = getattr(generator, "file_name", None)
    begin = getattr(generator, "begin_line", None)
    if not isinstance(file, str) or not isinstance(begin, int):
        return None
    name = getattr(getattr(generator, "jit_fn", None), "__name__", "the kernel")
    return file, begin, name


def _jit_location(src: object) -> tuple[str, int, str] | None:
    """(file, line before the ``def``, name) of the solution's jitted function with source
    ``src``: the solution's modules are searched, as the error names no function."""
    if not isinstance(src, str) or not src:
        return None
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not isinstance(file, str) or not in_build_copy(file):
            continue
        for value in list(vars(module).values()):
            if getattr(value, "src", None) != src or not callable(getattr(value, "fn", None)):
                continue
            code = getattr(value.fn, "__code__", None)
            if code is None:
                continue
            begin = _def_line(code.co_filename, code.co_firstlineno) - 1
            return code.co_filename, begin, code.co_name
    return None


def _def_line(file: str, first: int) -> int:
    """The ``def`` line of a function whose first line (a decorator, maybe) is ``first``:
    the compiler counts the kernel's lines from its ``def``."""
    for line in range(first, first + 50):
        if linecache.getline(file, line).lstrip().startswith(("def ", "async def ")):
            return line
    return first


def _error_line(err: BaseException) -> str:
    """``Type: message`` on one line, as the last line of a traceback gives it."""
    text = "".join(traceback.format_exception_only(type(err), err)).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _note(where: str, source: str, what: str) -> str:
    lines = [NOTE_HEAD, f"  {where}"]
    if source.strip():
        lines.append(f"    {source.strip()}")
    return "\n".join([*lines, what])
