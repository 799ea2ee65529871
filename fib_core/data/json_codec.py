"""The organizers' file helpers (``load_json_file``, ``save_jsonl_file``, ``from_json``...).

Code written for flashinfer-bench reads and writes the format with these names. The models
are pydantic, so each helper is pydantic's serialisation plus the kit's file handling (atomic
writes, crash-safe appends, errors naming file and line; see :mod:`.json_io`). Both argument
orders of the loaders work: ``load_json_file(path, Definition)`` (0.1 era) and
``load_json_file(Definition, path)`` (newer releases).

    >>> from fib_core.data import Definition, load_json_file
    >>> definition = load_json_file("definitions/gdn/gdn_decode.json", Definition)  # doctest: +SKIP
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from .json_io import (
    append_jsonl,
    dump_json,
    dump_jsonl,
    load_json,
    load_jsonl,
    parse_json,
    to_json_text,
    validate,
)

T = TypeVar("T", bound=BaseModel)


def _path_and_class(a: Any, b: Any) -> tuple[Path, type]:
    """(path, model class) from either argument order."""
    if isinstance(a, type):
        return Path(b), a
    return Path(a), b


def dataclass_to_dict(obj: Any) -> Any:
    """Plain JSON data for a model (its ``to_dict``), a list/dict of them, an Enum or a Path."""
    if isinstance(obj, (list, tuple)):
        return [dataclass_to_dict(o) for o in obj]
    if isinstance(obj, dict):
        return {k: dataclass_to_dict(v) for k, v in obj.items()}
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, BaseModel):
        to_dict = getattr(obj, "to_dict", None)
        return to_dict() if callable(to_dict) else obj.model_dump(mode="json")
    if isinstance(obj, Path):
        return str(obj)
    return obj


def dict_to_dataclass(data: dict[str, Any], cls: type[T]) -> T:
    """``cls.model_validate(data)``, a bad value reported as one located ``SchemaError``."""
    return validate(cls, data)


def to_json(obj: Any, indent: int = 2) -> str:
    """``obj`` (a model, or plain data holding models) as JSON text."""
    if isinstance(obj, BaseModel):
        return to_json_text(obj, indent=indent)
    return to_json_text(dataclass_to_dict(obj), indent=indent)


def from_json(json_str: str, cls: type[T]) -> T:
    """Parse JSON text as ``cls`` (``ValueError`` on bad JSON or a bad value)."""
    return validate(cls, parse_json(json_str, Path("<json text>")))


def save_json_file(obj: Any, path: str | Path) -> None:
    """Write ``obj`` as indented JSON, atomically (same as :func:`fib_core.data.dump_json`)."""
    dump_json(obj, path)


def load_json_file(path: Any, cls: Any) -> Any:
    """Load one model from a JSON file (same as :func:`fib_core.data.load_json`)."""
    file, model = _path_and_class(path, cls)
    return load_json(file, model)


def save_jsonl_file(objects: list[Any], path: str | Path) -> None:
    """Replace a JSONL file with ``objects``, one a line (same as ``dump_jsonl``)."""
    dump_jsonl(objects, path)


def load_jsonl_file(path: Any, cls: Any) -> list[Any]:
    """Every record of a JSONL file as the model (same as :func:`fib_core.data.load_jsonl`)."""
    file, model = _path_and_class(path, cls)
    return load_jsonl(file, model)


def append_jsonl_line(path: str | Path, obj: Any) -> None:
    """Append one record (crash-safe, same as ``append_jsonl(path, [obj])``)."""
    append_jsonl(path, [obj])


def append_jsonl_lines(path: str | Path, objs: list[Any]) -> None:
    """Append several records in one write (same as :func:`fib_core.data.append_jsonl`)."""
    append_jsonl(path, objs)


def append_jsonl_file(objects: list[Any], path: str | Path) -> None:
    """The newer releases' spelling of :func:`append_jsonl_lines` (records first)."""
    append_jsonl(path, objects)
