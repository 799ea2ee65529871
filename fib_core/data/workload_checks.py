"""A workload checked against its definition, before any tensor is made.

The schema classes check each record on its own; these checks need the definition too: the
axes a workload may set, the inputs it may name and the form each input may take, and where
its blobs may live. Each failure is a :class:`SchemaError` with the field path, so the loader
can add the file and line and the contestant sees one line saying what to fix.
"""

from __future__ import annotations

from fib_core.errors import SchemaError

from .containment import relative_path_problem
from .definition import Definition
from .workload import SafetensorsInput, ScalarInput, Workload


def blob_path_problem(path: str) -> str | None:
    """Why a workload's blob ``path`` may not be used (None when it is fine): blob paths are
    relative to the dataset root and stay inside it."""
    problem = relative_path_problem(path)
    return problem.replace("its folder", "the dataset root") if problem else None


def check_workload(definition: Definition, workload: Workload) -> None:
    """Raise :class:`SchemaError` (field path from the record's top: ``workload.…``) if the
    workload does not fit ``definition``."""
    const = definition.const_axes
    var = definition.var_axes
    for axis_name in var:
        if axis_name not in workload.axes:
            raise SchemaError(
                f"a value for var axis {axis_name!r}",
                field=f"workload.axes.{axis_name}",
                hint=f"workload {workload.uuid}",
            )
    for axis_name, value in workload.axes.items():
        if axis_name in const and value != const[axis_name]:
            raise SchemaError(
                f"{const[axis_name]} (a const axis of {definition.name})",
                field=f"workload.axes.{axis_name}",
                found=value,
                hint="remove the axis from the workload or fix its value",
            )
        if axis_name not in const and axis_name not in var:
            raise SchemaError(
                f"an axis of {definition.name} ({', '.join(definition.axes) or 'none'})",
                field="workload.axes",
                found=axis_name,
                hint="remove it from the workload or fix the name",
            )
    for name, source in workload.inputs.items():
        spec = definition.inputs.get(name)
        if spec is None:
            raise SchemaError(
                f"an input of {definition.name} ({', '.join(definition.inputs)})",
                field="workload.inputs",
                found=name,
                hint=f"workload {workload.uuid}",
            )
        field = f"workload.inputs.{name}"
        if isinstance(source, ScalarInput) and spec.shape is not None:
            raise SchemaError(
                f'"random" or "safetensors" for tensor input {name!r} (shape {spec.shape})',
                field=f"{field}.type",
                found="scalar",
                hint="scalars are only for inputs whose shape is null",
            )
        if isinstance(source, SafetensorsInput):
            problem = blob_path_problem(source.path)
            if problem:
                raise SchemaError(
                    "a path relative to the dataset root, inside it",
                    field=f"{field}.path",
                    found=source.path,
                    hint=f"it is {problem}; move the blob under the dataset's blob/ folder",
                )
