"""pydantic's ValidationError as the kit's one-line :class:`~fib_core.errors.SchemaError`.

The models raise pydantic's ``ValidationError`` (a ``ValueError``), as the organizers' package
does. The kit's loaders and commands turn it into a :class:`SchemaError` naming the field path
inside the record (``inputs.x.dtype``), the value found and what was expected; the loader adds
the file and line. The kit's own rules raise :func:`rule_error`, which carries those parts so
the message reads exactly as the rule wrote it.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from fib_core.errors import SchemaError

RULE = "fib_rule"  # the error type of the kit's own rules


class _JsonNull:
    """Stands for a JSON null in messages (``found=None`` would mean "nothing to show")."""

    def __repr__(self) -> str:
        return "null"


NULL = _JsonNull()
_NOTHING = object()


def rule_error(
    expected: str, *, found: Any = _NOTHING, field: str | None = None, hint: str | None = None
) -> PydanticCustomError:
    """An error of one of the kit's rules, to ``raise`` inside a validator.

    ``field`` is the path below the object being validated (for model-level rules such as
    "a shape names a declared axis": ``outputs.y.shape[1]``); ``found`` defaults to the value
    being validated.
    """
    ctx: dict[str, Any] = {"expected": expected}
    if found is not _NOTHING:
        ctx["found"] = NULL if found is None else found
    if field:
        ctx["field"] = field
    if hint:
        ctx["hint"] = hint
    # pydantic's own message names the object; a rule about one of its fields says which.
    return PydanticCustomError(RULE, "{field}: {expected}" if field else "{expected}", ctx)


# What a contestant should read for pydantic's own error types (the rest: pydantic's message).
_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a JSON object",
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "dataclass_type": "a JSON object",
    "string_too_short": "a non-empty string",
    "too_short": "a non-empty list",
}


def _expected(error: dict) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == RULE:
        return ctx["expected"]
    if kind in ("literal_error", "enum"):
        return "one of " + ctx.get("expected", "")
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        op = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=",
              "less_than": "<"}[kind]
        bound = next(iter(ctx.values()))
        noun = "an integer" if isinstance(error.get("input"), int) else "a number"
        return f"{noun} {op} {bound}"
    if kind in _EXPECTED:
        return _EXPECTED[kind]
    message = str(error.get("msg", kind))
    for prefix in ("Input should be ", "Value error, "):
        if message.startswith(prefix):
            return message[len(prefix):]
    return message


def _path(loc: tuple, data: Any) -> tuple[list[str | int], Any, bool]:
    """The error's location as keys of the input ``data``, the value there, and whether the
    last key is absent from the input.

    pydantic's location also holds the names of union members (``axes.h.const.value``); those
    are not keys of the input, so following the input drops them.
    """
    if data is None:  # validated from Python arguments: pydantic's location as it is
        return list(loc), _NOTHING, False
    parts: list[str | int] = []
    current = data
    for i, key in enumerate(loc):
        if isinstance(current, dict) and key in current:
            current = current[key]
        elif isinstance(current, (list, tuple)) and isinstance(key, int) and key < len(current):
            current = current[key]
        elif isinstance(current, dict) and i == len(loc) - 1:
            parts.append(key)
            return parts, _NOTHING, True
        else:
            continue
        parts.append(key)
    return parts, current, False


def _join(parts: list[str | int]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def schema_error(err: ValidationError, data: Any = None) -> SchemaError:
    """The first problem of ``err`` as one :class:`SchemaError` (field path, found, expected).

    ``data`` is the input that was validated (a dict read from a file), used to spell the
    field path as the file's keys. Several errors at one place (a value no member of a union
    accepts) are joined: "expected an integer or a number".
    """
    errors = err.errors(include_url=False)
    first = errors[0]
    parts, value, absent = _path(tuple(first["loc"]), data)
    if first["type"] == "missing" or absent:
        key = parts.pop() if parts else first["loc"][-1]
        return SchemaError(f"missing the required key {key!r}", field=_join(parts) or None)
    if first["type"] == "union_tag_not_found":
        return SchemaError("missing the required key 'type'", field=_join(parts) or None)
    if first["type"] == "union_tag_invalid":
        ctx = first.get("ctx") or {}
        return SchemaError(
            "one of " + ctx.get("expected_tags", ""),
            field=_join([*parts, "type"]),
            found=ctx.get("tag"),
        )
    ctx = first.get("ctx") or {}
    if first["type"] == RULE and "field" in ctx:  # a rule naming a field below the object
        return SchemaError(
            ctx["expected"],
            field=_join([*parts, ctx["field"]]),
            found=ctx.get("found"),
            hint=ctx.get("hint"),
        )
    # Several errors at one place: the members of a union, each refusing the value. A rule of
    # the kit's among them says it best; otherwise every member's wish is listed.
    here = [e for e in errors if _path(tuple(e["loc"]), data)[0] == parts] or [first]
    rules = [e for e in here if e["type"] == RULE]
    expected: list[str] = []
    for error in rules or here:
        if _expected(error) not in expected:
            expected.append(_expected(error))
    ctx = (rules[0] if rules else first).get("ctx") or {}
    found = ctx.get("found", value if value is not _NOTHING else first.get("input"))
    return SchemaError(
        " or ".join(expected),
        field=_join(parts) or None,
        found=NULL if found is None else found,
        hint=ctx.get("hint"),
    )
