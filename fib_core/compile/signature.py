"""Check, before any run, that the entry function takes what the definition will pass.

The most reported failure in these contests is a destination-passing-style mismatch that only
shows up as "expected N parameters" deep inside a worker. When the parameter list is visible
(Python functions; tvm-ffi functions built with their type schema; pybind and TORCH_LIBRARY
functions through their docstring/schema) we compare it with the definition and name the
``config.toml`` key that fixes a mismatch.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from typing import Any

from fib_core.errors import SignatureError

DPS_KEY = "`destination_passing_style = {value}` under [build] in config.toml"


def expected_params(definition: Any, dps: bool) -> list[str]:
    names = list(definition.inputs)
    return names + list(definition.outputs) if dps else names


def visible_params(fn: Callable[..., Any]) -> tuple[list[str], int, bool] | None:
    """``(names, required count, takes *args)`` when Python can see the signature, else None."""
    params = _torch_op_params(fn) or _pybind_params(fn)
    if params is not None:
        return params, len(params), False
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    names: list[str] = []
    required = 0
    varargs = False
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            varargs = True
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
            if p.default is p.empty:
                required += 1
    return names, required, varargs


def check_signature(
    fn: Callable[..., Any],
    definition: Any,
    dps: bool,
    name: str = "run",
    params: list[str] | None = None,
) -> None:
    """Raise SignatureError when ``fn`` cannot take the definition's positional arguments.

    ``params`` overrides what Python can see (compiled functions whose parameter list the
    builder learnt another way, e.g. from a tvm-ffi type schema).
    """
    seen = (params, len(params), False) if params is not None else visible_params(fn)
    if seen is None:
        return
    names, required, varargs = seen
    want = expected_params(definition, dps)
    if required <= len(want) and (varargs or len(want) <= len(names)):
        return
    n_in, n_out = len(definition.inputs), len(definition.outputs)
    got = f"got {name}({', '.join(names)}{', *args' if varargs else ''})"
    if dps:
        style = "(destination-passing style: inputs then outputs)"
        fix = (f"set {DPS_KEY.format(value='false')} if your function returns its outputs"
               if len(names) == n_in else
               "take the inputs, then the preallocated outputs, in the definition's order")
    else:
        returned = ", ".join(definition.outputs)
        style = f"(value-returning style: returns {returned})"
        fix = (f"set {DPS_KEY.format(value='true')} if your function writes into preallocated "
               "outputs" if len(names) == n_in + n_out else
               "take the inputs in the definition's order")
    raise SignatureError(f"expected {name}({', '.join(want)}) {style}, {got}; {fix}")


def _torch_op_params(fn: Callable[..., Any]) -> list[str] | None:
    """TORCH_LIBRARY operators (``torch.ops.ns.name``) carry a schema with argument names."""
    default = getattr(fn, "default", None)
    schema = getattr(default, "_schema", None)
    if schema is None:
        return None
    return [arg.name for arg in schema.arguments]


_PYBIND_DOC = re.compile(r"^\s*(?:1\.\s*)?\w+\((?P<args>.*)\)\s*->")


def _pybind_params(fn: Callable[..., Any]) -> list[str] | None:
    """pybind11 functions put ``name(arg0: Tensor, alpha: float) -> None`` on their doc's line 1.

    Overloaded functions (several signatures) are left unchecked.
    """
    owner = type(getattr(fn, "__self__", None)).__name__
    if owner != "PyCapsule" and not owner.startswith("pybind11"):
        return None
    doc = (getattr(fn, "__doc__", None) or "").strip()
    if not doc or "Overloaded function" in doc.splitlines()[0]:
        return None
    m = _PYBIND_DOC.match(doc.splitlines()[0])
    if m is None:
        return None
    args = _split_top_level(m["args"])
    return [a.split(":", 1)[0].strip() for a in args if a.strip()]


def _split_top_level(text: str) -> Sequence[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts
