"""The organizers' JSON helper names (``fib_core.data.json_codec``) over :mod:`.json_io`.

Code written for flashinfer-bench reads and writes the format with ``load_json_file(path,
Definition)``, ``save_jsonl_file(traces, path)`` and friends. These are those names, spelled as
that API spells them, doing the work through the kit's own readers and writers (atomic writes,
errors naming file and line, crash-safe appends): one implementation, two spellings.

    >>> from fib_core.data import Definition, load_json_file
    >>> definition = load_json_file("definitions/gdn/gdn_decode.json", Definition)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import json
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from .json_io import append_jsonl, dump_json, dump_jsonl, load_json, load_jsonl, to_json_data

T = TypeVar("T")


def dataclass_to_dict(obj: Any) -> Any:
    """Plain JSON data for a schema object (its ``to_dict``), a list/dict of them, or an Enum."""
    if isinstance(obj, (list, tuple)):
        return [dataclass_to_dict(o) for o in obj]
    if isinstance(obj, dict):
        return {k: dataclass_to_dict(v) for k, v in obj.items()}
    if isinstance(obj, Enum):
        return obj.value
    if hasattr(obj, "to_dict"):
        return to_json_data(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: dataclass_to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Path):
        return str(obj)
    return obj


def dict_to_dataclass(data: dict[str, Any], cls: type[T]) -> T:
    """Parse ``data`` as ``cls`` with the schema's validation (``cls.from_dict``)."""
    return cls.from_dict(data)  # type: ignore[attr-defined]


def to_json(obj: Any, indent: int = 2) -> str:
    """``obj`` as JSON text (schema objects through ``to_dict``)."""
    return json.dumps(dataclass_to_dict(obj), indent=indent, ensure_ascii=False)


def from_json(json_str: str, cls: type[T]) -> T:
    """Parse JSON text as ``cls`` (``ValueError``/``SchemaError`` on bad input)."""
    try:
        data = json.loads(json_str)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"from_json: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})"
        ) from None
    return dict_to_dataclass(data, cls)


def save_json_file(obj: Any, path: str | Path) -> None:
    """Write ``obj`` as indented JSON, atomically (same as :func:`fib_core.data.dump_json`)."""
    dump_json(dataclass_to_dict(obj), path)


def load_json_file(path: str | Path, cls: type[T]) -> T:
    """Load one ``cls`` from a JSON file (same as :func:`fib_core.data.load_json`)."""
    return load_json(path, cls)


def save_jsonl_file(objects: list[Any], path: str | Path) -> None:
    """Replace a JSONL file with ``objects``, one a line (same as ``dump_jsonl``)."""
    dump_jsonl(objects, path)


def load_jsonl_file(path: str | Path, cls: type[T]) -> list[T]:
    """Every record of a JSONL file as ``cls`` (same as :func:`fib_core.data.load_jsonl`)."""
    return load_jsonl(path, cls)


def append_jsonl_line(path: str | Path, obj: Any) -> None:
    """Append one record (crash-safe, same as ``append_jsonl(path, [obj])``)."""
    append_jsonl(path, [obj])


def append_jsonl_lines(path: str | Path, objs: list[Any]) -> None:
    """Append several records in one write (same as :func:`fib_core.data.append_jsonl`)."""
    append_jsonl(path, objs)
