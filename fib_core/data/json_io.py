"""Reading and writing schema objects as JSON files and JSONL record streams.

Loaders attach the file name and line number to every schema error, so a contestant sees where
the bad record is. Writers never leave a half-written file behind (JSON: temp file + rename) and
never let a crash-truncated JSONL line swallow the next record (append starts on a fresh line).
"""

from __future__ import annotations

import functools
import json
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from fib_core.atomic import atomic_write_text
from fib_core.errors import LFS_POINTER_PREFIX, FibWarning, LfsPointerError, SchemaError

from ._schema import write_float

T = TypeVar("T")

_LFS_TEXT = LFS_POINTER_PREFIX.decode("ascii")


class TruncatedRecordWarning(FibWarning):
    """A JSONL line that stops mid-record (an interrupted write) was skipped."""


def _read_text(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise SchemaError(
            "UTF-8 text", file=path, found=f"undecodable byte at offset {err.start}"
        ) from None
    if text.startswith(_LFS_TEXT):
        raise LfsPointerError(path)
    return text


class _NonStandardJson(ValueError):
    """A bare ``NaN``/``Infinity`` literal: Python's json module takes it, other tools do not."""

    def __init__(self, token: str) -> None:
        super().__init__(token)
        self.token = token


def _reject_constant(token: str) -> Any:
    raise _NonStandardJson(token)


_NON_STANDARD_HINT = 'write non-finite numbers as the strings "NaN", "Infinity", "-Infinity"'
_TOO_DEEP = "a JSON value nested less deeply (the file is broken or not a dataset file)"


def _parse_error(err: Exception, text: str, path: Path, line: int | None) -> SchemaError:
    """One located :class:`SchemaError` for a failed ``json.loads`` of ``text``."""
    if isinstance(err, _NonStandardJson):
        where = line if line is not None else text[: text.find(err.token)].count("\n") + 1
        return SchemaError(
            "standard JSON",
            file=path,
            line=where,
            found=f"bare {err.token}",
            hint=_NON_STANDARD_HINT,
        )
    if isinstance(err, json.JSONDecodeError):
        return SchemaError(
            "valid JSON" if line is None else "one JSON object per line",
            file=path,
            line=err.lineno if line is None else line,
            found=f"{err.msg} at column {err.colno}",
        )
    return SchemaError(_TOO_DEEP, file=path, line=line, found="nesting too deep to parse")


def parse_json(text: str, path: Path, line: int | None = None) -> Any:
    """``json.loads`` that takes only standard JSON; every failure (syntax, bare NaN/Infinity,
    nesting too deep for the parser) becomes one :class:`SchemaError` naming file and line."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (json.JSONDecodeError, _NonStandardJson, RecursionError) as err:
        raise _parse_error(err, text, path, line) from None


def load_json(path: str | Path, cls: type[T]) -> T:
    """Load one object of ``cls`` (a schema class with ``from_dict``) from a JSON file."""
    path = Path(path)
    raw = parse_json(_read_text(path), path)
    try:
        return cls.from_dict(raw)  # type: ignore[attr-defined]
    except SchemaError as err:
        raise err.located(path) from None
    except RecursionError:
        raise SchemaError(_TOO_DEEP, file=path, found="nesting too deep") from None


def is_truncated_json(text: str) -> bool:
    """True if ``text`` stops inside an object, array or string: a prefix of a longer record.

    Distinguishes an interrupted write (skippable) from a real syntax error (reported).
    """
    depth = 0
    in_string = False
    escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return in_string or depth > 0


def iter_jsonl(path: str | Path) -> Iterable[tuple[int, Any]]:
    """(line number, parsed JSON) for each non-blank line; interrupted records are skipped.

    A record cut short by a crash is skipped with a :class:`TruncatedRecordWarning`, wherever it
    is (a later append starts on a new line, so the cut record can end up mid-file). Any other
    undecodable line is an error naming the file and line.
    """
    path = Path(path)
    text = _read_text(path)
    loads = json.loads
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line or line.isspace():
            continue
        try:
            yield lineno, loads(line, parse_constant=_reject_constant)
        except (json.JSONDecodeError, _NonStandardJson, RecursionError) as err:
            if isinstance(err, json.JSONDecodeError) and is_truncated_json(line):
                warnings.warn(
                    f"{path}:{lineno}: skipped an incomplete record (an interrupted write?)",
                    TruncatedRecordWarning,
                    stacklevel=2,
                )
                continue
            raise _parse_error(err, line, path, lineno) from None


def load_jsonl(path: str | Path, cls: type[T], **from_dict_kwargs: Any) -> list[T]:
    """Load every record of a JSONL file as ``cls``; errors name the file and line.

    ``from_dict_kwargs`` go to ``cls.from_dict`` (e.g. ``cache=`` for :class:`Trace`).
    """
    path = Path(path)
    from_dict = cls.from_dict  # type: ignore[attr-defined]
    if from_dict_kwargs:
        from_dict = functools.partial(from_dict, **from_dict_kwargs)
    out = []
    for lineno, raw in iter_jsonl(path):
        try:
            out.append(from_dict(raw))
        except SchemaError as err:
            raise err.located(path, lineno) from None
        except RecursionError:
            raise SchemaError(_TOO_DEEP, file=path, line=lineno, found="nesting too deep") from None
    return out


def to_json_data(obj: Any) -> Any:
    """Schema objects become dicts via ``to_dict``; plain JSON data passes through."""
    to_dict = getattr(obj, "to_dict", None)
    return to_dict() if callable(to_dict) else obj


def json_safe(value: Any) -> Any:
    """A copy that strict JSON can hold: non-finite floats become the format's strings
    ("NaN", "Infinity", "-Infinity"), keys strings and tuples lists. The kit's one encoder of
    non-finite numbers; every writer goes through it (see :func:`to_standard_json`)."""
    if isinstance(value, float):
        return write_float(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def to_standard_json(data: Any, **kwargs: Any) -> str:
    """``json.dumps`` that never writes a bare NaN/Infinity (which the loaders reject): a
    non-finite float, wherever it sits, is written as the format's string form."""
    try:
        return json.dumps(data, allow_nan=False, ensure_ascii=False, **kwargs)
    except ValueError:
        return json.dumps(json_safe(data), allow_nan=False, ensure_ascii=False, **kwargs)


def dump_json(obj: Any, path: str | Path) -> None:
    """Write one object as indented JSON, atomically (a reader never sees half a file)."""
    atomic_write_text(Path(path), to_standard_json(to_json_data(obj), indent=2) + "\n")


def _jsonl_lines(objs: Iterable[Any]) -> str:
    return "".join(to_standard_json(to_json_data(o), separators=(",", ":")) + "\n" for o in objs)


def dump_jsonl(objs: Iterable[Any], path: str | Path) -> None:
    """Replace a JSONL file with these records, atomically."""
    atomic_write_text(Path(path), _jsonl_lines(objs))


def append_jsonl(path: str | Path, objs: Iterable[Any]) -> None:
    """Append records in one write, flushed and fsynced.

    If the file does not end in a newline (a previous writer died mid-record), a newline goes
    first, so the partial record stays a line of its own and the new records load intact. A
    write that fails (full disk, file-size limit) is undone before the error is raised.
    """
    path = Path(path)
    payload = _jsonl_lines(objs)
    if not payload:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    size = 0
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            payload = "\n" + payload
        data = payload.encode("utf-8")
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException as err:
        # A full disk or a file-size limit can stop the write half-way: cut the file back so
        # no half record is left, then let the caller decide where the records go instead.
        try:
            os.ftruncate(fd, size)
        except OSError:
            pass
        if isinstance(err, OSError) and err.filename is None:  # name the file in the message
            raise OSError(err.errno, err.strerror, str(path)) from None
        raise
    finally:
        os.close(fd)
