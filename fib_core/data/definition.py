"""Definition: what an operator computes, as data (axes, tensor specs, constraints, reference).

A contest adds an operator by adding one Definition JSON; the engine reads everything it needs
(shapes, dtypes, argument order, the reference's ``run``) from here, never from its name.
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fib_core.errors import SchemaError

from . import _schema as s
from .dtypes import DTYPE_NAMES, is_dtype_name


class _AxisRecord(s.Record):
    """What both axis kinds share: the ``type`` tag the format writes first, an optional
    description, unknown keys kept."""

    TAGS = ("type",)
    type: ClassVar[str]
    description: str | None
    extra: dict[str, Any]
    _keys: tuple[str, ...] | None

    def __post_init__(self) -> None:
        s.check_opt_str(self.description, "description")

    def _sizes(self) -> dict[str, Any]:
        return {}

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"type": self.type, **self._sizes()}
        s.put_optional(out, self._keys, "description", self.description)
        return s.with_unknown(out, self.extra, self._keys)


@dataclass
class AxisConst(_AxisRecord):
    """An axis whose size is fixed by the definition (``{"type": "const", "value": N}``)."""

    value: int
    description: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    _keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    type: ClassVar[str] = "const"

    def __post_init__(self) -> None:
        s.check_int(self.value, "value")
        super().__post_init__()

    def _sizes(self) -> dict[str, Any]:
        return {"value": self.value}


@dataclass
class AxisVar(_AxisRecord):
    """An axis whose size each workload chooses (``{"type": "var"}``)."""

    description: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    _keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    type: ClassVar[str] = "var"


Axis = AxisConst | AxisVar


def axis_from_dict(d: Any) -> Axis:
    """Parse one entry of ``axes``, dispatching on its ``type``."""
    s.as_object(d, "")
    kind = s.require(d, "type", "")
    if kind == "const":
        return AxisConst.from_dict(d)
    if kind == "var":
        return AxisVar.from_dict(d)
    raise SchemaError('"const" or "var"', field="type", found=kind)


@dataclass
class TensorSpec(s.Record):
    """One input or output: its shape as axis names (None = Python scalar, [] = 0-d tensor)."""

    shape: list[str] | None
    dtype: str
    description: str | None = None
    optional: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    _keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.shape is not None:
            s.check_str_list(self.shape, "shape")
        if not is_dtype_name(self.dtype):
            raise SchemaError(
                f"a known dtype (one of {', '.join(DTYPE_NAMES)})",
                field="dtype",
                found=self.dtype,
                hint="unknown dtype",
            )
        s.check_opt_str(self.description, "description")
        s.check_bool(self.optional, "optional")

    @property
    def is_scalar(self) -> bool:
        """True for a Python scalar argument (``shape`` null in the file)."""
        return self.shape is None

    def to_dict(self) -> dict:
        out: dict[str, Any] = {
            "shape": list(self.shape) if self.shape is not None else None,
            "dtype": self.dtype,
        }
        s.put_optional(out, self._keys, "description", self.description)
        s.put_optional(out, self._keys, "optional", self.optional, False)
        return s.with_unknown(out, self.extra, self._keys)


# Names a constraint expression may call besides the axes and tensors.
_CONSTRAINT_BUILTINS = {
    f.__name__: f for f in (abs, all, any, bool, float, int, len, max, min, round, sum)
}


@dataclass
class _Constraint:
    text: str
    code: Any
    names: frozenset[str]


@dataclass
class Definition(s.Record):
    """An operator contract: axes, inputs and outputs in call order, constraints, reference."""

    name: str
    op_type: str
    axes: dict[str, Axis]
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    reference: str
    tags: list[str] = field(default_factory=list)
    description: str | None = None
    constraints: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    _keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    PARSE = {
        "axes": lambda raw: s.parse_entries(raw, "axes", axis_from_dict),
        "inputs": lambda raw: s.parse_entries(raw, "inputs", TensorSpec.from_dict),
        "outputs": lambda raw: s.parse_entries(raw, "outputs", TensorSpec.from_dict),
    }

    def __post_init__(self) -> None:
        s.check_file_name(self.name, "name")
        s.check_file_name(self.op_type, "op_type")
        s.check_opt_str(self.description, "description")
        s.check_str_list(self.tags, "tags")
        s.check_str_list(self.constraints, "constraints")
        s.check_str(self.reference, "reference")
        for group in ("axes", "inputs", "outputs"):
            s.as_object(getattr(self, group), group)
        for axis_name, axis in self.axes.items():
            if not isinstance(axis, (AxisConst, AxisVar)):
                raise SchemaError("an AxisConst or AxisVar", field=f"axes.{axis_name}", found=axis)
        self._check_tensors()
        self._check_reference()
        self._compiled_constraints()  # syntax errors surface at load time, with their index

    def _check_tensors(self) -> None:
        for group in ("inputs", "outputs"):
            for tname, spec in getattr(self, group).items():
                where = f"{group}.{tname}"
                if not isinstance(spec, TensorSpec):
                    raise SchemaError("a TensorSpec", field=where, found=spec)
                for dim, axis_name in enumerate(spec.shape or ()):
                    if axis_name not in self.axes:
                        raise SchemaError(
                            f"an axis declared under 'axes' ({', '.join(self.axes) or 'none'})",
                            field=f"{where}.shape[{dim}]",
                            found=axis_name,
                            hint="add the axis to 'axes' or fix the name",
                        )
        clash = sorted(set(self.inputs) & set(self.outputs))
        if clash:
            raise SchemaError(
                "input and output names to differ", field=f"outputs.{clash[0]}", found=clash[0]
            )

    def _check_reference(self) -> None:
        try:
            tree = ast.parse(self.reference)
        except SyntaxError as err:
            raise SchemaError(
                "valid Python source",
                field="reference",
                found=f"syntax error at line {err.lineno}: {err.msg}",
            ) from None
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "run":
                args = node.args
                names = [a.arg for a in (*args.posonlyargs, *args.args)]
                self.__dict__["_signature"] = (self.reference, names)
                return
        raise SchemaError("a top-level function named 'run'", field="reference")

    def to_dict(self) -> dict:
        keys = self._keys
        out: dict[str, Any] = {"name": self.name}
        s.put_optional(out, keys, "description", self.description)
        out["op_type"] = self.op_type
        s.put_optional(out, keys, "tags", list(self.tags), [])
        out["axes"] = {k: v.to_dict() for k, v in self.axes.items()}
        s.put_optional(out, keys, "constraints", list(self.constraints), [])
        out["inputs"] = {k: v.to_dict() for k, v in self.inputs.items()}
        out["outputs"] = {k: v.to_dict() for k, v in self.outputs.items()}
        out["reference"] = self.reference
        return s.with_unknown(out, self.extra, keys)

    # --- helpers the engine uses -------------------------------------------------------------

    @property
    def const_axes(self) -> dict[str, int]:
        return {k: a.value for k, a in self.axes.items() if isinstance(a, AxisConst)}

    @property
    def var_axes(self) -> list[str]:
        return [k for k, a in self.axes.items() if isinstance(a, AxisVar)]

    @property
    def var_axis_bindings(self) -> dict[str, tuple[str, int]]:
        """Var axis -> the first (input name, dim) whose shape uses it: where its value can be read."""
        found: dict[str, tuple[str, int]] = {}
        var = set(self.var_axes)
        for tname, spec in self.inputs.items():
            for dim, axis_name in enumerate(spec.shape or ()):
                if axis_name in var and axis_name not in found:
                    found[axis_name] = (tname, dim)
        return found

    @property
    def input_names(self) -> list[str]:
        return list(self.inputs)

    @property
    def output_names(self) -> list[str]:
        return list(self.outputs)

    def _axis_values(self, var_values: dict[str, int]) -> dict[str, int]:
        values = self.const_axes
        for axis_name in self.var_axes:
            if axis_name not in var_values:
                raise SchemaError(
                    f"a value for var axis {axis_name!r} of definition {self.name!r}",
                    field=f"axes.{axis_name}",
                    hint="the workload's 'axes' must give every var axis",
                )
            values[axis_name] = s.check_int(var_values[axis_name], f"axes.{axis_name}")
        return values

    def _shapes(
        self, specs: dict[str, TensorSpec], var_values: dict[str, int]
    ) -> dict[str, tuple[int, ...] | None]:
        values = self._axis_values(var_values)
        return {
            tname: None if spec.shape is None else tuple(values[a] for a in spec.shape)
            for tname, spec in specs.items()
        }

    def input_shapes(self, var_values: dict[str, int]) -> dict[str, tuple[int, ...] | None]:
        """Concrete input shapes for a workload's var-axis values (None for scalars)."""
        return self._shapes(self.inputs, var_values)

    def output_shapes(self, var_values: dict[str, int]) -> dict[str, tuple[int, ...] | None]:
        """Concrete output shapes for a workload's var-axis values (None for scalars)."""
        return self._shapes(self.outputs, var_values)

    def _compiled_constraints(self) -> list[_Constraint]:
        cached = self.__dict__.get("_constraint_cache")
        if cached is not None and cached[0] == self.constraints:
            return cached[1]
        compiled = []
        for i, text in enumerate(self.constraints):
            try:
                code = compile(text, f"<constraint {i}>", "eval")
            except SyntaxError as err:
                raise SchemaError(
                    "a Python boolean expression",
                    field=f"constraints[{i}]",
                    found=text,
                    hint=err.msg,
                ) from None
            names = frozenset(
                n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)
            )
            compiled.append(_Constraint(text, code, names))
        self.__dict__["_constraint_cache"] = (list(self.constraints), compiled)
        return compiled

    def check_constraints(
        self, var_values: dict[str, int], inputs: dict[str, Any] | None = None
    ) -> list[str]:
        """The constraint expressions that evaluate false (or raise) for these values.

        Axis names are visible as integers and, when ``inputs`` is given, tensors by name. An
        expression that names something not available (a tensor not passed, an optional input
        that is None) cannot be judged and is skipped rather than reported.
        """
        namespace: dict[str, Any] = dict(self.const_axes)
        namespace.update(var_values)
        if inputs:
            namespace.update(inputs)
        failed = []
        for c in self._compiled_constraints():
            usable = all(n in _CONSTRAINT_BUILTINS or namespace.get(n) is not None for n in c.names)
            if not usable:
                continue
            try:
                ok = bool(eval(c.code, {"__builtins__": _CONSTRAINT_BUILTINS}, namespace))
            except Exception:  # an expression that cannot be evaluated on these values fails
                ok = False
            if not ok:
                failed.append(c.text)
        return failed

    def reference_signature(self) -> list[str]:
        """Positional parameter names of the reference's top-level ``run``."""
        cached = self.__dict__.get("_signature")
        if cached is None or cached[0] != self.reference:
            self._check_reference()
            cached = self.__dict__["_signature"]
        return list(cached[1])

    def content_hash(self) -> str:
        """sha256 of the canonical JSON: any change to the contract or reference changes it."""
        return _hash_json(self.to_dict())

    # --- the organizers' spellings of the helpers above (same results) -----------------------

    def get_const_axes(self) -> dict[str, int]:
        """Const axis -> value (same as :attr:`const_axes`)."""
        return self.const_axes

    def get_var_axes(self) -> list[str]:
        """Names of the var axes, in declaration order (same as :attr:`var_axes`)."""
        return self.var_axes

    @property
    def get_var_axes_bindings(self) -> dict[str, tuple[str, int]]:
        """Var axis -> (input name, dim) (same as :attr:`var_axis_bindings`).

        An attribute, not a method, as in the organizers' API: ``d.get_var_axes_bindings``.
        """
        return self.var_axis_bindings

    def get_input_shapes(
        self, var_values: dict[str, int] | None = None
    ) -> dict[str, list[int] | None]:
        """Input shapes as lists for these var-axis values (:meth:`input_shapes`, None = {})."""
        return _as_lists(self.input_shapes(var_values or {}))

    def get_output_shapes(
        self, var_values: dict[str, int] | None = None
    ) -> dict[str, list[int] | None]:
        """Output shapes as lists for these var-axis values (:meth:`output_shapes`, None = {})."""
        return _as_lists(self.output_shapes(var_values or {}))


def _as_lists(shapes: dict[str, tuple[int, ...] | None]) -> dict[str, list[int] | None]:
    return {name: None if shape is None else list(shape) for name, shape in shapes.items()}


def _hash_json(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
