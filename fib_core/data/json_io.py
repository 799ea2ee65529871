"""Reading and writing schema objects as JSON files and JSONL record streams.

Loaders attach the file name and line number to every schema error, so a contestant sees where
the bad record is. Writers never leave a half-written file behind (JSON: temp file + rename) and
never let a crash-truncated JSONL line swallow the next record (append starts on a fresh line).
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from fib_core.errors import LFS_POINTER_PREFIX, LfsPointerError, SchemaError

T = TypeVar("T")

_LFS_TEXT = LFS_POINTER_PREFIX.decode("ascii")


class TruncatedRecordWarning(UserWarning):
    """A JSONL line that stops mid-record (an interrupted write) was skipped."""


def _read_text(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise SchemaError("UTF-8 text", file=path, found=f"undecodable byte at offset {err.start}") from None
    if text.startswith(_LFS_TEXT):
        raise LfsPointerError(path)
    return text


def load_json(path: str | Path, cls: type[T]) -> T:
    """Load one object of ``cls`` (a schema class with ``from_dict``) from a JSON file."""
    path = Path(path)
    text = _read_text(path)
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise SchemaError(
            "valid JSON", file=path, line=err.lineno, found=f"{err.msg} at column {err.colno}"
        ) from None
    try:
        return cls.from_dict(raw)  # type: ignore[attr-defined]
    except SchemaError as err:
        raise err.located(path) from None


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
            yield lineno, loads(line)
        except json.JSONDecodeError as err:
            if is_truncated_json(line):
                warnings.warn(
                    f"{path}:{lineno}: skipped an incomplete record (an interrupted write?)",
                    TruncatedRecordWarning,
                    stacklevel=2,
                )
                continue
            raise SchemaError(
                "one JSON object per line",
                file=path,
                line=lineno,
                found=f"{err.msg} at column {err.colno}",
            ) from None


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
    return out


def to_json_data(obj: Any) -> Any:
    """Schema objects become dicts via ``to_dict``; plain JSON data passes through."""
    to_dict = getattr(obj, "to_dict", None)
    return to_dict() if callable(to_dict) else obj


def atomic_write_text(path: Path, data: str) -> None:
    """Write ``data`` to ``path`` through a temp file and a rename: a crash never leaves half
    a file, and a reader sees the old content or the new, nothing between."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dump_json(obj: Any, path: str | Path) -> None:
    """Write one object as indented JSON, atomically (a reader never sees half a file)."""
    atomic_write_text(Path(path), json.dumps(to_json_data(obj), indent=2, ensure_ascii=False) + "\n")


def _jsonl_lines(objs: Iterable[Any]) -> str:
    dumps = json.dumps
    return "".join(
        dumps(to_json_data(o), separators=(",", ":"), ensure_ascii=False) + "\n" for o in objs
    )


def dump_jsonl(objs: Iterable[Any], path: str | Path) -> None:
    """Replace a JSONL file with these records, atomically."""
    atomic_write_text(Path(path), _jsonl_lines(objs))


def append_jsonl(path: str | Path, objs: Iterable[Any]) -> None:
    """Append records in one write, flushed and fsynced.

    If the file does not end in a newline (a previous writer died mid-record), a newline goes
    first, so the partial record stays a line of its own and the new records load intact.
    """
    path = Path(path)
    payload = _jsonl_lines(objs)
    if not payload:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
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
    finally:
        os.close(fd)
