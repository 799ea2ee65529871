"""The base of the FlashInfer-Trace models: pydantic v2, as the organizers' package.

Code written for ``flashinfer_bench`` calls ``Definition.model_validate(d)``,
``Solution.model_validate_json(s)``, ``trace.model_dump()``, ``model_copy(update=...)``; all of
that is pydantic's and works unchanged here. On top of it each model keeps the kit's own forms:

- ``from_dict`` / ``to_dict``: the lossless pair the kit's loaders and writers use. ``from_dict``
  raises the kit's one-line :class:`~fib_core.errors.SchemaError` instead of pydantic's
  ``ValidationError``; ``to_dict`` writes back exactly the keys the file had (an optional key
  the file left out stays out) and non-finite numbers as the format's strings.
- Keys the format does not name are kept (``extra="allow"``) and written back, so newer files
  round-trip; on most models they read as the ``extra`` dict (``performance.extra``).
- Positional construction in the format's key order (``Performance(1.0, 2.0, 2.0)``), which
  earlier kit code uses.

    >>> from fib_core.data import Performance
    >>> p = Performance.model_validate({"latency_ms": 1.0, "reference_latency_ms": "Infinity",
    ...                                 "speedup_factor": 2.0, "p50_ms": 0.9})
    >>> p.extra, p.model_dump_json()
    ({'p50_ms': 0.9}, '{"latency_ms":1.0,"reference_latency_ms":"Infinity","speedup_factor":2.0,"p50_ms":0.9}')
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import from_json

from .validation import schema_error


class _Constructor(type(BaseModel)):
    """Adds the kit's constructor forms to ``Model(...)`` calls made from Python.

    Written on the metaclass, not as ``__init__``: a model with its own ``__init__`` makes
    pydantic-core call back into Python for every object it validates, which would slow
    loading a dataset several times over. Objects validated from data never come here.
    """

    def __call__(cls, *args: Any, **data: Any) -> Any:
        if args:
            names = cls.POSITIONAL
            if len(args) > len(names):
                raise TypeError(
                    f"{cls.__name__}() takes at most {len(names)} positional arguments "
                    f"({', '.join(names) or 'none'}), got {len(args)}"
                )
            for name, value in zip(names, args, strict=False):
                if name in data:
                    raise TypeError(f"{cls.__name__}() got two values for {name!r}")
                data[name] = value
        extra = data.pop("extra", None) if "extra" not in cls.model_fields else None
        obj = super().__call__(**data)
        if cls.ALWAYS:
            obj.__pydantic_fields_set__.update(cls.ALWAYS)
        if extra:
            obj.__pydantic_extra__.update(extra)
        return obj


class Record(BaseModel, metaclass=_Constructor):
    """A FlashInfer-Trace object: validated on construction, serialised as the format's JSON."""

    model_config = ConfigDict(
        extra="allow",
        ser_json_inf_nan="strings",
        # Validators are built on first use, not at import: every process of a run imports
        # these models (about 60 ms of start-up each), few validate all of them. For the same
        # reason the attribute docstrings become field descriptions only when a JSON schema is
        # asked for (pydantic's use_attribute_docstrings reads the source at import: 80 ms).
        defer_build=True,
    )

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """pydantic's JSON schema, its fields described by their attribute docstrings."""
        _describe_records()
        return super().model_json_schema(*args, **kwargs)

    # Field names positional arguments fill, in order (the kit's constructors took them so).
    POSITIONAL: ClassVar[tuple[str, ...]] = ()
    # Keys a constructed object always writes even when left at their default (a workload
    # record's "solution": null); a parsed one writes exactly the keys its input had.
    ALWAYS: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """Validate plain JSON data; a bad value raises :class:`~fib_core.errors.SchemaError`
        (one line: field path, value found, what was expected)."""
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            raise schema_error(err, data) from None

    def to_json_text(self, indent: int | None = None) -> str:
        """The object as the kit writes it: the keys it was given or always writes, unknown
        keys kept, non-finite numbers as "NaN"/"Infinity"/"-Infinity"."""
        return self.model_dump_json(indent=indent, exclude_unset=True)

    def to_dict(self) -> dict[str, Any]:
        """:meth:`to_json_text` as plain data (JSON types only): what the file holds."""
        return from_json(self.to_json_text())


class OpenRecord(Record):
    """A record whose unknown keys read as ``extra`` (a live dict: changes are written back).

    ``extra=`` in the constructor sets them, as the kit's dataclasses took it.
    """

    @property
    def extra(self) -> dict[str, Any]:
        """The keys the format does not name (the kit keeps its additions here)."""
        if self.__pydantic_extra__ is None:  # an object made by model_construct
            self.__pydantic_extra__ = {}
        return self.__pydantic_extra__


_DESCRIBED: set[type] = set()


def _describe_records() -> None:
    """Give every Record model's fields their attribute docstrings as descriptions (once per
    model), then rebuild the models so their schemas carry them."""
    todo, pending = [Record], []
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls in _DESCRIBED:
            continue
        _DESCRIBED.add(cls)
        docs = _attribute_docstrings(cls)
        for name, field in cls.model_fields.items():
            if field.description is None and name in docs:
                field.description = docs[name]
        pending.append(cls)
    for cls in pending:
        cls.model_rebuild(force=True)


def _attribute_docstrings(cls: type) -> dict[str, str]:
    """``name: type`` followed by a string literal in a class body: name -> that text."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for stmt, nxt in zip(body, body[1:], strict=False):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)):
            docs[stmt.target.id] = inspect.cleandoc(nxt.value.value)
    return docs
