"""Small validation helpers shared by the schema classes.

Every check raises :class:`~fib_core.errors.SchemaError` with the *field path* inside the object
being parsed; the loaders in :mod:`fib_core.data.json_io` add the file and line afterwards. The
helpers are plain functions with ``isinstance`` checks because they run once per field of every
trace in a dataset: loading tens of thousands of records must stay cheap.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Self, TypeVar

from fib_core.errors import SchemaError

JSON_OBJECT = "a JSON object"


class _JsonNull:
    """Stands for a JSON null in messages (``found=None`` would mean "nothing to show")."""

    def __repr__(self) -> str:
        return "null"


NULL = _JsonNull()


def shown(value: Any) -> Any:
    """The value as an error message should show it: None becomes ``null``."""
    return NULL if value is None else value


def join(prefix: str, field: str | None) -> str:
    """Field path ``prefix.field`` (either part may be empty)."""
    if not prefix:
        return field or ""
    return f"{prefix}.{field}" if field else prefix


def nested(err: SchemaError, prefix: str) -> SchemaError:
    """Re-raise helper: the same error with its field path placed under ``prefix``."""
    return SchemaError(
        err.expected,
        file=err.file,
        line=err.line,
        field=join(prefix, err.field),
        found=err.found,
        hint=err.hint,
    )


T = TypeVar("T")


def parse_under(field: str, parse: Callable[[Any], T], raw: Any) -> T:
    """``parse(raw)`` for a nested object: a SchemaError it raises names its field path under
    ``field`` (``evaluation.performance.latency_ms``), so the message points into the file."""
    try:
        return parse(raw)
    except SchemaError as err:
        raise nested(err, field) from None


def parse_entries(raw: Any, field: str, parse: Callable[[Any], T]) -> dict[str, T]:
    """``{name: parse(value)}`` for a JSON object of named entries (axes, inputs, outputs);
    an error names the entry (``inputs.q.dtype``)."""
    as_object(raw, field)
    return {name: parse_under(f"{field}.{name}", parse, value) for name, value in raw.items()}


def as_object(value: Any, field: str) -> dict:
    if not isinstance(value, dict):
        raise SchemaError(JSON_OBJECT, field=field or None, found=shown(value))
    return value


def require(d: dict, key: str, field: str) -> Any:
    try:
        return d[key]
    except KeyError:
        raise SchemaError(f"missing the required key {key!r}", field=field or None) from None


def check_str(value: Any, field: str, *, non_empty: bool = True) -> str:
    if not isinstance(value, str) or (non_empty and not value):
        raise SchemaError(
            "a non-empty string" if non_empty else "a string", field=field, found=shown(value)
        )
    return value


# Longest name a file name can be built from (255 bytes, less room for a suffix such as
# ".safetensors" or a uuid).
MAX_NAME_BYTES = 200


def check_file_name(value: Any, field: str) -> str:
    """A non-empty string usable as one file or folder name: no '/', '\\', NUL, no '..'.

    Definition names and op_types become folders of the dataset and the caches; a name that
    climbs out (``../x``, ``/tmp/x``) would make the kit write outside them.
    """
    check_str(value, field)
    bad = (
        "/" in value
        or "\\" in value
        or "\0" in value
        or ".." in value
        or value.startswith(".")
        or len(value.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES
    )
    if bad:
        raise SchemaError(
            f"a name usable as a file name (no '/', '\\', '..', NUL, leading '.'; at most "
            f"{MAX_NAME_BYTES} bytes)",
            field=field,
            found=value,
            hint="rename it, e.g. letters, digits and '_' only",
        )
    return value


def check_opt_str(value: Any, field: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise SchemaError("a string or null", field=field, found=shown(value))
    return value


def check_int(value: Any, field: str, *, minimum: int | None = 0) -> int:
    # bool is an int subclass in Python but not in the format.
    if not isinstance(value, int) or isinstance(value, bool):
        raise SchemaError("an integer", field=field, found=shown(value))
    if minimum is not None and value < minimum:
        raise SchemaError(f"an integer >= {minimum}", field=field, found=shown(value))
    return value


def check_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise SchemaError("true or false", field=field, found=shown(value))
    return value


def check_str_list(value: Any, field: str) -> list[str]:
    if not isinstance(value, list):
        raise SchemaError("a list of strings", field=field, found=shown(value))
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise SchemaError("a string", field=f"{field}[{i}]", found=shown(item))
    return value


def check_str_dict(value: Any, field: str) -> dict[str, str]:
    as_object(value, field)
    for key, item in value.items():
        if not isinstance(item, str):
            raise SchemaError("a string", field=f"{field}.{key}", found=shown(item))
    return value


# Non-finite floats: the organizers' models write them as these strings; plain JSON has no
# token for them, and the loaders reject the bare literals Python's json module would accept.
_NONFINITE_IN = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def read_float(value: Any, field: str, *, non_negative: bool = False) -> float:
    """A JSON number, or one of the strings "Infinity", "-Infinity", "NaN"."""
    if isinstance(value, str):
        try:
            value = _NONFINITE_IN[value]
        except KeyError:
            raise SchemaError(
                'a number (or "Infinity", "-Infinity", "NaN")', field=field, found=value
            ) from None
    elif not isinstance(value, (int, float)) or isinstance(value, bool):
        raise SchemaError("a number", field=field, found=shown(value))
    if non_negative and value < 0:  # NaN compares false: allowed, as in the format
        raise SchemaError("a number >= 0 (or NaN)", field=field, found=shown(value))
    return float(value)


def write_float(value: float | None) -> float | str | None:
    """The JSON form of a float: finite as a number, non-finite as the format's strings
    ("NaN", "Infinity", "-Infinity"), None (not measured) as null."""
    if value is None or math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def unknown_keys(d: dict, known: frozenset[str]) -> dict:
    """The keys of ``d`` that the schema does not name: kept so newer files round-trip."""
    if known.issuperset(d):
        return {}
    return {k: v for k, v in d.items() if k not in known}


def key_order(d: dict) -> tuple[str, ...]:
    """The key order of a parsed object, remembered so ``to_dict`` writes the same order."""
    return tuple(d)


def in_order(out: dict, order: Iterable[str] | None) -> dict:
    """``out`` re-ordered like the parsed input; keys the input lacked keep their place at the end."""
    if order is None:
        return out
    order = tuple(order)
    if tuple(out) == order:
        return out
    ordered = {k: out[k] for k in order if k in out}
    ordered.update(out)
    return ordered


def was_present(order: tuple[str, ...] | None, key: str) -> bool:
    """True if the parsed input spelled ``key`` out, so it is written back even at its default."""
    return order is not None and key in order


def put_optional(
    out: dict, order: tuple[str, ...] | None, key: str, value: Any, default: Any = None
) -> None:
    """Write an optional key unless it holds its default and the parsed input left it out:
    files stay as short as the format allows, and a file's explicit default round-trips."""
    if value != default or was_present(order, key):
        out[key] = value


def with_unknown(out: dict, unknown: dict, order: tuple[str, ...] | None) -> dict:
    """``out`` plus the keys the schema does not name, in the parsed input's key order: what
    every ``to_dict`` ends with, so newer files round-trip byte for byte."""
    out.update(unknown)
    return in_order(out, order)


class Record:
    """Base of the schema dataclasses that map one JSON object: ``from_dict`` read off the
    dataclass fields, so each key is named once (in the field list).

    A field without a default is a required key, one with a default an optional key (absent:
    the default). ``PARSE`` maps a key to the function turning its raw value into the field
    (nested objects; the function names its own field path). ``TAGS`` are keys the format has
    but the class keeps no field for (an axis's ``type``). Keys the schema does not name go to
    the ``UNKNOWN`` field and the parsed key order to ``_keys``, so ``to_dict`` writes a newer
    file back as it was.
    """

    PARSE: ClassVar[dict[str, Callable[[Any], Any]]] = {}
    TAGS: ClassVar[tuple[str, ...]] = ()
    UNKNOWN: ClassVar[str] = "extra"

    @classmethod
    def _schema_keys(cls) -> tuple[tuple[tuple[str, bool], ...], frozenset[str]]:
        """((key, required) per field, every known key), computed once per class."""
        cached = cls.__dict__.get("_schema_cache")
        if cached is None:
            keys = tuple(
                (
                    f.name,
                    f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                )
                for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                if f.name not in (cls.UNKNOWN, "_keys")
            )
            cached = (keys, frozenset(name for name, _ in keys) | frozenset(cls.TAGS))
            cls._schema_cache = cached  # type: ignore[attr-defined]
        return cached

    @classmethod
    def from_dict(cls, d: dict) -> Self:
        """Parse one JSON object; a SchemaError names the field path inside it."""
        as_object(d, "")
        keys, known = cls._schema_keys()
        kwargs: dict[str, Any] = {}
        for key, required in keys:
            if key in d:
                parse = cls.PARSE.get(key)
                kwargs[key] = d[key] if parse is None else parse(d[key])
            elif required:
                raise SchemaError(f"missing the required key {key!r}")
        kwargs[cls.UNKNOWN] = unknown_keys(d, known)
        return cls(**kwargs, _keys=key_order(d))
