"""Workload: one concrete instance of a definition (var-axis values and where inputs come from)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from fib_core.errors import SchemaError

from . import _schema as s


@dataclass
class RandomInput:
    """The harness fills this input with random numbers of the definition's dtype and shape."""

    extra: dict[str, Any] = field(default_factory=dict)

    type: ClassVar[str] = "random"
    _KNOWN: ClassVar[frozenset[str]] = frozenset({"type"})

    @classmethod
    def from_dict(cls, d: dict) -> RandomInput:
        return cls(extra=s.unknown_keys(d, cls._KNOWN))

    def to_dict(self) -> dict:
        return {"type": "random", **self.extra}


@dataclass
class ScalarInput:
    """A fixed Python number passed as-is (for inputs whose shape is null)."""

    value: int | float | bool
    extra: dict[str, Any] = field(default_factory=dict)

    type: ClassVar[str] = "scalar"
    _KNOWN: ClassVar[frozenset[str]] = frozenset({"type", "value"})

    def __post_init__(self) -> None:
        if not isinstance(self.value, (int, float, bool)):
            raise SchemaError("a number or boolean", field="value", found=self.value)

    @classmethod
    def from_dict(cls, d: dict) -> ScalarInput:
        return cls(value=s.require(d, "value", ""), extra=s.unknown_keys(d, cls._KNOWN))

    def to_dict(self) -> dict:
        return {"type": "scalar", "value": self.value, **self.extra}


@dataclass
class SafetensorsInput:
    """A tensor stored in a safetensors blob; a relative ``path`` is relative to the dataset root."""

    path: str
    tensor_key: str
    extra: dict[str, Any] = field(default_factory=dict)

    type: ClassVar[str] = "safetensors"
    _KNOWN: ClassVar[frozenset[str]] = frozenset({"type", "path", "tensor_key"})

    def __post_init__(self) -> None:
        s.check_str(self.path, "path")
        s.check_str(self.tensor_key, "tensor_key")

    @classmethod
    def from_dict(cls, d: dict) -> SafetensorsInput:
        return cls(
            path=s.require(d, "path", ""),
            tensor_key=s.require(d, "tensor_key", ""),
            extra=s.unknown_keys(d, cls._KNOWN),
        )

    def to_dict(self) -> dict:
        return {
            "type": "safetensors",
            "path": self.path,
            "tensor_key": self.tensor_key,
            **self.extra,
        }


InputSpec = RandomInput | ScalarInput | SafetensorsInput

_INPUT_TYPES: dict[str, type[RandomInput] | type[ScalarInput] | type[SafetensorsInput]] = {
    "random": RandomInput,
    "scalar": ScalarInput,
    "safetensors": SafetensorsInput,
}


def input_spec_from_dict(d: Any) -> InputSpec:
    """Parse one entry of a workload's ``inputs``, dispatching on ``type``."""
    s.as_object(d, "")
    kind = s.require(d, "type", "")
    cls = _INPUT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise SchemaError('"random", "scalar" or "safetensors"', field="type", found=kind)
    return cls.from_dict(d)


@dataclass
class Workload(s.Record):
    """Var-axis values plus an input spec per input name, identified by ``uuid``."""

    PARSE = {"inputs": lambda raw: s.parse_entries(raw, "inputs", input_spec_from_dict)}

    uuid: str
    axes: dict[str, int]
    inputs: dict[str, InputSpec]
    extra: dict[str, Any] = field(default_factory=dict)
    _keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        s.check_str(self.uuid, "uuid")
        s.as_object(self.axes, "axes")
        for axis_name, value in self.axes.items():
            s.check_int(value, f"axes.{axis_name}")
        s.as_object(self.inputs, "inputs")
        if "tags" in self.extra:
            s.check_str_list(self.extra["tags"], "tags")

    @property
    def tags(self) -> list[str]:
        """Labels such as "quick" kept in the record's ``tags`` key ([] when absent)."""
        return list(self.extra.get("tags", ()))

    def to_dict(self) -> dict:
        out: dict[str, Any] = {
            "uuid": self.uuid,
            "axes": dict(self.axes),
            "inputs": {k: v.to_dict() for k, v in self.inputs.items()},
        }
        return s.with_unknown(out, self.extra, self._keys)
