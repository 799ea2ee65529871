"""Workload: one concrete instance of a definition (var-axis values and where inputs come from)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .fields import Bool, NonEmptyStr, NonNegativeInt
from .model import OpenRecord
from .validation import rule_error

_Number = Annotated[int, Field(strict=True)] | Annotated[float, Field(strict=True)] | Bool


class RandomInput(OpenRecord):
    """The harness fills this input with random numbers of the definition's dtype and shape."""

    ALWAYS = frozenset({"type"})

    type: Literal["random"] = "random"
    """The tag of random inputs."""


class ScalarInput(OpenRecord):
    """A fixed Python number passed as-is (for inputs whose shape is null)."""

    POSITIONAL = ("value",)
    ALWAYS = frozenset({"type"})

    type: Literal["scalar"] = "scalar"
    """The tag of scalar inputs."""
    value: _Number
    """The number (integer, float or boolean) passed to the kernel."""


class SafetensorsInput(OpenRecord):
    """A tensor stored in a safetensors blob; a relative ``path`` is relative to the dataset root."""

    POSITIONAL = ("path", "tensor_key")
    ALWAYS = frozenset({"type"})

    type: Literal["safetensors"] = "safetensors"
    """The tag of inputs read from a safetensors file."""
    path: NonEmptyStr
    """The blob file, relative to the dataset root."""
    tensor_key: NonEmptyStr
    """The tensor's key inside the file."""


InputSpec = Annotated[RandomInput | ScalarInput | SafetensorsInput, Field(discriminator="type")]


class Workload(OpenRecord):
    """Var-axis values plus an input spec per input name, identified by ``uuid``."""

    POSITIONAL = ("uuid", "axes", "inputs")

    uuid: NonEmptyStr
    """Unique id of this workload."""
    axes: dict[str, NonNegativeInt]
    """Value of each var axis."""
    inputs: dict[str, InputSpec]
    """Where each input comes from."""

    @model_validator(mode="after")
    def _check_tags(self) -> Workload:
        tags = self.__pydantic_extra__.get("tags") if self.__pydantic_extra__ else None
        if tags is not None and not (
            isinstance(tags, list) and all(isinstance(t, str) for t in tags)
        ):
            raise rule_error("a list of strings", field="tags", found=tags)
        return self

    @property
    def tags(self) -> list[str]:
        """Labels such as "quick" kept in the record's ``tags`` key ([] when absent)."""
        return list(self.extra.get("tags", ()))
