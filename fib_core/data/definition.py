"""Definition: what an operator computes, as data (axes, tensor specs, constraints, reference).

A contest adds an operator by adding one Definition JSON; the engine reads everything it needs
(shapes, dtypes, argument order, the reference's ``run``) from here, never from its name.
"""

from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from fib_core.errors import SchemaError

from .dtypes import DTYPE_NAMES
from .fields import Bool, FileName, NonEmptyStr, NonNegativeInt, Str
from .model import OpenRecord
from .validation import rule_error

DTypeName = Literal[DTYPE_NAMES]  # type: ignore[valid-type]


class AxisConst(OpenRecord):
    """An axis whose size is fixed by the definition (``{"type": "const", "value": N}``)."""

    POSITIONAL = ("value", "description")
    ALWAYS = frozenset({"type"})

    type: Literal["const"] = "const"
    """The tag that marks a constant axis."""
    value: NonNegativeInt
    """The axis size."""
    description: Str | None = None
    """What the axis stands for."""


class AxisVar(OpenRecord):
    """An axis whose size each workload chooses (``{"type": "var"}``)."""

    POSITIONAL = ("description",)
    ALWAYS = frozenset({"type"})

    type: Literal["var"] = "var"
    """The tag that marks a variable axis."""
    description: Str | None = None
    """What the axis stands for."""


Axis = Annotated[AxisConst | AxisVar, Field(discriminator="type")]
AxisSpec = Axis  # the organizers' name of the axis union


class TensorSpec(OpenRecord):
    """One input or output: its shape as axis names (None = Python scalar, [] = 0-d tensor)."""

    POSITIONAL = ("shape", "dtype", "description", "optional")

    shape: list[NonEmptyStr] | None
    """Axis names, outermost first; null for a Python scalar argument."""
    dtype: DTypeName
    """Element type, one of the format's dtype names."""
    description: Str | None = None
    """What the tensor holds."""
    optional: Bool = False
    """True when the caller may pass None for this input."""

    @property
    def is_scalar(self) -> bool:
        """True for a Python scalar argument (``shape`` null in the file)."""
        return self.shape is None


# Names a constraint expression may call besides the axes and tensors.
_CONSTRAINT_BUILTINS = {
    f.__name__: f for f in (abs, all, any, bool, float, int, len, max, min, round, sum)
}


@dataclass
class _Constraint:
    text: str
    code: Any
    names: frozenset[str]


class Definition(OpenRecord):
    """An operator contract: axes, inputs and outputs in call order, constraints, reference.

    >>> d = Definition.model_validate({
    ...     "name": "scale", "op_type": "toy", "axes": {"n": {"type": "var"}},
    ...     "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
    ...     "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
    ...     "reference": "def run(x):\\n    return x * 2\\n"})
    >>> d.var_axes, d.get_input_shapes({"n": 3})
    (['n'], {'x': [3]})
    """

    name: FileName
    """Unique name of the definition (also a file and folder name)."""
    description: Str | None = None
    """What the operator computes."""
    op_type: FileName
    """The operator family (gemm, gqa_paged, moe, ...); a folder name in the dataset."""
    tags: list[NonEmptyStr] = Field(default_factory=list)
    """Labels for grouping and filtering."""
    axes: dict[NonEmptyStr, Axis]
    """The symbolic dimensions the shapes name."""
    constraints: list[NonEmptyStr] = Field(default_factory=list)
    """Python boolean expressions over axis names (and tensors) every workload satisfies."""
    inputs: dict[NonEmptyStr, TensorSpec]
    """Inputs in call order."""
    outputs: dict[NonEmptyStr, TensorSpec]
    """Outputs in call order; no name is also an input's."""
    reference: NonEmptyStr
    """Python source with a top-level ``run`` taking the inputs and returning the outputs."""

    @model_validator(mode="after")
    def _check_contract(self) -> Definition:
        for group in ("inputs", "outputs"):
            for tname, spec in getattr(self, group).items():
                for dim, axis_name in enumerate(spec.shape or ()):
                    if axis_name not in self.axes:
                        raise rule_error(
                            f"an axis declared under 'axes' ({', '.join(self.axes) or 'none'})",
                            field=f"{group}.{tname}.shape[{dim}]",
                            found=axis_name,
                            hint="add the axis to 'axes' or fix the name",
                        )
        clash = sorted(set(self.inputs) & set(self.outputs))
        if clash:
            raise rule_error(
                "input and output names to differ", field=f"outputs.{clash[0]}", found=clash[0]
            )
        try:
            self._check_reference()
            self._compiled_constraints()  # syntax errors surface at load time, with their index
        except SchemaError as err:
            shown = {} if err.found is None else {"found": err.found}
            raise rule_error(err.expected, field=err.field, hint=err.hint, **shown) from None
        return self

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
    def var_axes_bindings(self) -> dict[str, tuple[str, int]]:
        """The organizers' name of :attr:`var_axis_bindings`."""
        return self.var_axis_bindings

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
            value = var_values[axis_name]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise SchemaError("an integer >= 0", field=f"axes.{axis_name}", found=value)
            values[axis_name] = value
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
