"""Apply keys: what part of a call decides which solution runs.

The default keys a call on the values of its definition's var axes, read from the shapes of
the inputs (``batch_size=8``); a workload record gives the same key from its ``axes``, so a
live call and the benchmarked workload meet in one dict lookup. An op type whose best kernel
depends on more than shapes (say, the average sequence length) registers its own builder with
:meth:`ApplyKeyFactory.register`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from fib_core.errors import FibError


class ApplyKeyError(FibError, KeyError):
    """A call lacks an input its definition needs to compute the key."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, slots=True)
class ApplyKey:
    """A hashable routing key: ``axes`` and ``feats`` as sorted ``(name, value)`` pairs.

    >>> key = ApplyKey(axes=(("batch_size", 8),))
    >>> ApplyKey.from_encoded(key.encode) == key
    True
    """

    axes: tuple[tuple[str, int], ...] = ()
    feats: tuple[tuple[str, Any], ...] = ()

    @property
    def encode(self) -> str:
        """A stable string form (JSON), used in the on-disk table cache (a property, as in the
        organizers' API)."""
        return json.dumps(
            {"axes": [list(p) for p in self.axes], "feats": [list(p) for p in self.feats]},
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def from_encoded(cls, s: str) -> ApplyKey:
        data = json.loads(s)
        return cls(
            axes=tuple((str(k), int(v)) for k, v in data.get("axes", [])),
            feats=tuple((str(k), v) for k, v in data.get("feats", [])),
        )


class ApplyKeyBuilder(ABC):
    """Builds keys for one definition, from a live call or from a workload record.

    Subclasses implement :meth:`build_from_runtime`, :meth:`build_from_workload` and
    :meth:`features` so that a call and the workload it resembles give equal keys.
    """

    def __init__(self, defn: Any) -> None:
        self.definition = defn

    @abstractmethod
    def build_from_runtime(self, runtime_kwargs: Mapping[str, Any]) -> ApplyKey: ...

    @abstractmethod
    def build_from_workload(self, workload: Any) -> ApplyKey: ...

    @abstractmethod
    def features(self, runtime_kwargs: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
        """Key parts beyond the axes (none for axes-only keys)."""

    def axis_values(self, runtime_kwargs: Mapping[str, Any]) -> dict[str, int]:
        """Every var axis readable from the inputs' shapes (used to size DPS outputs)."""
        return dict(self._read_axes(runtime_kwargs))

    def _read_axes(self, runtime_kwargs: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
        plan = self.__dict__.get("_plan")
        if plan is None:
            bindings = self.definition.var_axis_bindings
            plan = tuple(sorted((axis, inp, dim) for axis, (inp, dim) in bindings.items()))
            self._plan = plan
        try:
            return tuple([(axis, runtime_kwargs[inp].shape[dim]) for axis, inp, dim in plan])
        except (KeyError, AttributeError, IndexError):
            for axis, inp, dim in plan:
                value = runtime_kwargs.get(inp)
                if inp not in runtime_kwargs:
                    raise ApplyKeyError(
                        f"{self.definition.name}: the call has no argument {inp!r} (it has: "
                        f"{', '.join(runtime_kwargs) or 'none'}); name the function's "
                        f"parameters as the definition's inputs: {', '.join(self.definition.inputs)}"
                    ) from None
                if value is None or len(getattr(value, "shape", ())) <= dim:
                    raise ApplyKeyError(
                        f"{self.definition.name}: var axis {axis!r} is read from dim {dim} of "
                        f"input {inp!r}, but the call gave {type(value).__name__}"
                    ) from None
            raise


class AxesOnlyKeyBuilder(ApplyKeyBuilder):
    """Keys on the var-axis values only (the default for every op type)."""

    def build_from_runtime(self, runtime_kwargs: Mapping[str, Any]) -> ApplyKey:
        return ApplyKey(axes=self._read_axes(runtime_kwargs))

    def build_from_workload(self, workload: Any) -> ApplyKey:
        names = sorted(self.definition.var_axis_bindings)
        return ApplyKey(axes=tuple((n, int(workload.axes[n])) for n in names if n in workload.axes))

    def features(self, runtime_kwargs: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
        return ()


class GEMMKeyBuilder(AxesOnlyKeyBuilder):
    """GEMM op types: keyed on their var axes (usually M)."""


class GQAKeyBuilder(AxesOnlyKeyBuilder):
    """Grouped-query attention op types: keyed on their var axes."""


class MLAKeyBuilder(AxesOnlyKeyBuilder):
    """Multi-head latent attention op types: keyed on their var axes."""


class ApplyKeyFactory:
    """Which key builder each op type uses (``AxesOnlyKeyBuilder`` unless registered).

    >>> ApplyKeyFactory.register("gdn", AxesOnlyKeyBuilder)
    >>> builder = ApplyKeyFactory.specialize(definition)  # doctest: +SKIP
    """

    _registry: ClassVar[dict[str, type[ApplyKeyBuilder]]] = {}

    @classmethod
    def register(cls, type_name: str, builder_cls: type[ApplyKeyBuilder]) -> None:
        if not (isinstance(builder_cls, type) and issubclass(builder_cls, ApplyKeyBuilder)):
            raise TypeError(f"{builder_cls!r} is not an ApplyKeyBuilder subclass")
        cls._registry[type_name] = builder_cls

    @classmethod
    def unregister(cls, type_name: str) -> None:
        cls._registry.pop(type_name, None)

    @classmethod
    def for_type(cls, type_name: str) -> type[ApplyKeyBuilder]:
        """The builder class registered for an op type (AxesOnlyKeyBuilder if none)."""
        return cls._registry.get(type_name, AxesOnlyKeyBuilder)

    @classmethod
    def specialize(cls, defn: Any) -> ApplyKeyBuilder:
        return cls.for_type(defn.op_type)(defn)


for _op_type, _builder in (
    ("gemm", GEMMKeyBuilder),
    ("gqa_paged", GQAKeyBuilder),
    ("gqa_ragged", GQAKeyBuilder),
    ("mla_paged", MLAKeyBuilder),
):
    ApplyKeyFactory.register(_op_type, _builder)
