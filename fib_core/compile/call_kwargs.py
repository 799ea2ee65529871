"""Calling a built solution by keyword, the organizers' way: ``runnable(q=q, k=k, ...)``.

The kit's engine passes arguments positionally in the definition's order; code written for
flashinfer-bench passes the inputs by name and expects the outputs back. These two helpers turn
the keywords into the positional inputs and, for a destination-passing-style solution, allocate
the outputs from the definition (shapes with the var axes read off the inputs, dtypes).
"""

from __future__ import annotations

from typing import Any


def inputs_in_order(definition: Any, kwargs: dict[str, Any], who: str) -> list[Any]:
    """The definition's inputs taken from ``kwargs``, in order; optional ones default to None."""
    unknown = sorted(set(kwargs) - set(definition.inputs))
    if unknown:
        raise TypeError(
            f"{who}: unexpected input {unknown[0]!r}; {definition.name} takes "
            + ", ".join(definition.inputs)
        )
    ordered = []
    for name, spec in definition.inputs.items():
        if name not in kwargs and not spec.optional:
            raise TypeError(f"{who}: missing input {name!r} of {definition.name}")
        ordered.append(kwargs.get(name))
    return ordered


def var_axis_values(definition: Any, inputs: list[Any]) -> dict[str, int]:
    """Var axis -> its size, read from the first input tensor that carries it."""
    by_name = dict(zip(definition.inputs, inputs, strict=True))
    values: dict[str, int] = {}
    for axis, (tensor_name, dim) in definition.var_axis_bindings.items():
        tensor = by_name.get(tensor_name)
        if tensor is not None and hasattr(tensor, "shape"):
            values[axis] = int(tensor.shape[dim])
    return values


def allocate_outputs(definition: Any, inputs: list[Any]) -> list[Any]:
    """Empty output tensors of the definition's shapes and dtypes, on the inputs' device."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    # Imported here: fib_core.data.dtypes loads pydantic (~50 ms); this module's import does not.
    from fib_core.data.dtypes import torch_dtype

    device = next((t.device for t in inputs if isinstance(t, torch.Tensor)), torch.device("cpu"))
    values = var_axis_values(definition, inputs)
    missing = [a for a in definition.var_axes if a not in values]
    needed = {a for spec in definition.outputs.values() for a in (spec.shape or ())}
    if any(a in needed for a in missing):
        raise TypeError(
            f"{definition.name}: cannot size the outputs, var axis {missing[0]!r} appears in no "
            "input given; call runnable.run(inputs, outputs) with preallocated outputs"
        )
    shapes = definition.output_shapes({a: values.get(a, 0) for a in definition.var_axes})
    outputs = []
    for name, spec in definition.outputs.items():
        if shapes[name] is None:
            raise TypeError(
                f"{definition.name}: output {name!r} is a scalar; a DPS function cannot write it"
            )
        outputs.append(torch.empty(shapes[name], dtype=torch_dtype(spec.dtype), device=device))
    return outputs
