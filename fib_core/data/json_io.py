"""Dataset files on disk: reading with located errors, writing without half-written files.

The models (pydantic) parse and serialise one record; this module adds what a file needs on
top. Loaders read standard JSON only (a bare ``NaN`` is refused: other tools cannot read it),
skip a JSONL record a crash cut short, recognise a git-LFS pointer, and turn a validation
error into one :class:`SchemaError` naming file, line and field. Writers never leave a
half-written file behind (JSON: temp file + rename) and never let a crash-truncated JSONL line
swallow the next record (append starts on a fresh line).
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from fib_core.atomic import atomic_write_text
from fib_core.errors import LFS_POINTER_PREFIX, FibWarning, LfsPointerError, SchemaError

from .validation import schema_error

T = TypeVar("T", bound=BaseModel)

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


def validate(cls: type[T], raw: Any, path: Path | None = None, line: int | None = None) -> T:
    """``cls.model_validate(raw)``; a bad value becomes one :class:`SchemaError` naming the file,
    line and field."""
    try:
        return cls.model_validate(raw)
    except (ValidationError, RecursionError):
        raise validate_error(cls, raw, path, line) from None


def validate_error(cls: type, raw: Any, path: Path | None, line: int | None) -> SchemaError:
    """The :class:`SchemaError` for a record ``cls`` refuses (validated again, alone, so the
    field path is the record's own)."""
    try:
        cls.model_validate(raw)
    except ValidationError as err:
        return schema_error(err, raw).located(path, line)
    except RecursionError:
        return SchemaError(_TOO_DEEP, file=path, line=line, found="nesting too deep")
    raise AssertionError(f"{cls.__name__} accepted the record it refused")  # pragma: no cover


def load_json(path: str | Path, cls: type[T]) -> T:
    """Load one ``cls`` (a pydantic model) from a JSON file."""
    path = Path(path)
    return validate(cls, parse_json(_read_text(path), path), path)


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


def _lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) of each non-blank line."""
    return [
        (lineno, line)
        for lineno, line in enumerate(text.split("\n"), start=1)
        if line and not line.isspace()
    ]


def iter_jsonl(path: str | Path) -> list[tuple[int, Any]]:
    """(line number, parsed JSON) for each non-blank line; interrupted records are skipped.

    A record cut short by a crash is skipped with a :class:`TruncatedRecordWarning`, wherever it
    is (a later append starts on a new line, so the cut record can end up mid-file). Any other
    undecodable line is an error naming the file and line.
    """
    path = Path(path)
    numbered = _lines(_read_text(path))
    # A sound file (nearly all) is parsed in one call of pydantic-core's parser; any problem
    # (a bad or cut line, a bare NaN, deep nesting) goes line by line for the located message.
    try:
        values = from_json("[" + ",".join(line for _, line in numbered) + "]", allow_inf_nan=False)
    except ValueError:
        values = None
    if isinstance(values, list) and len(values) == len(numbered):
        return [(lineno, value) for (lineno, _), value in zip(numbered, values, strict=True)]
    return _parse_lines(path, numbered)


def _parse_lines(path: Path, numbered: list[tuple[int, str]]) -> list[tuple[int, Any]]:
    out = []
    for lineno, line in numbered:
        try:
            out.append((lineno, json.loads(line, parse_constant=_reject_constant)))
        except (json.JSONDecodeError, _NonStandardJson, RecursionError) as err:
            if isinstance(err, json.JSONDecodeError) and is_truncated_json(line):
                warnings.warn(
                    f"{path}:{lineno}: skipped an incomplete record (an interrupted write?)",
                    TruncatedRecordWarning,
                    stacklevel=3,
                )
                continue
            raise _parse_error(err, line, path, lineno) from None
    return out


def iter_records(path: str | Path, cls: type[T]) -> list[tuple[int, T]]:
    """(line number, record) for every record of a JSONL file, validated as ``cls`` (a
    pydantic model); an error names the file, line and field.

    Each line goes straight from text to object in pydantic-core (``model_validate_json``), the
    fastest way it offers. That parser takes bare NaN/Infinity, which the format does not, so a
    file spelling either word has its lines parsed strictly first. Any failure re-reads the file
    line by line, for the located message (or the warning for a record a crash cut short).
    """
    path = Path(path)
    text = _read_text(path)
    validate_json = cls.model_validate_json
    strict = "NaN" in text or "Infinity" in text
    out = []
    try:
        for lineno, line in enumerate(text.split("\n"), start=1):
            if not line or line.isspace():
                continue
            if strict:
                out.append((lineno, cls.model_validate(from_json(line, allow_inf_nan=False))))
            else:
                out.append((lineno, validate_json(line)))
    except (ValueError, RecursionError):  # ValidationError is a ValueError too
        return [
            (lineno, validate(cls, raw, path, lineno))
            for lineno, raw in _parse_lines(path, _lines(text))
        ]
    return out


def load_jsonl(path: str | Path, cls: type[T]) -> list[T]:
    """Load every record of a JSONL file as ``cls``; errors name the file and line."""
    return [record for _, record in iter_records(path, cls)]


def write_float(value: float | None) -> float | str | None:
    """The JSON form of a float: finite as a number, non-finite as the format's strings
    ("NaN", "Infinity", "-Infinity"), None (not measured) as null."""
    if value is None or math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def json_safe(value: Any) -> Any:
    """A copy of plain data that strict JSON can hold: non-finite floats become the format's
    strings, keys strings and tuples lists (the models do the same for their own fields)."""
    if isinstance(value, float):
        return write_float(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def to_standard_json(data: Any, **kwargs: Any) -> str:
    """``json.dumps`` of plain data that never writes a bare NaN/Infinity (which the loaders
    reject): a non-finite float, wherever it sits, is written as the format's string form."""
    try:
        return json.dumps(data, allow_nan=False, ensure_ascii=False, **kwargs)
    except ValueError:
        return json.dumps(json_safe(data), allow_nan=False, ensure_ascii=False, **kwargs)


def to_json_text(obj: Any, indent: int | None = None) -> str:
    """JSON text of a model (as the kit writes it: see ``Record.to_json_text``) or of plain
    data; compact when ``indent`` is None."""
    own = getattr(obj, "to_json_text", None)
    if callable(own):
        return own(indent=indent)
    if isinstance(obj, BaseModel):
        return obj.model_dump_json(indent=indent)
    to_dict = getattr(obj, "to_dict", None)  # the kit's other records (ledger entries, ...)
    if callable(to_dict):
        obj = to_dict()
    if indent is None:
        return to_standard_json(obj, separators=(",", ":"))
    return to_standard_json(obj, indent=indent)


def dump_json(obj: Any, path: str | Path) -> None:
    """Write one object as indented JSON, atomically (a reader never sees half a file)."""
    atomic_write_text(Path(path), to_json_text(obj, indent=2) + "\n")


def _jsonl_lines(objs: Iterable[Any]) -> str:
    return "".join(to_json_text(o) + "\n" for o in objs)


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
