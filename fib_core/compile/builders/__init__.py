"""Builders: the kit's back ends (:mod:`.base`, :mod:`.python`, :mod:`.tvm_ffi`,
:mod:`.torch_ext`) and the organizers' builder classes (``PythonBuilder``, ``TritonBuilder``,
``CUDABuilder``: ``can_build``/``build(definition, solution)``/``clear_cache`` over the same
back ends). The organizers' classes load on first use, so importing a back end stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["CUDABuilder", "PythonBuilder", "TritonBuilder"]

_LAZY = {
    "CUDABuilder": "cuda_builder",
    "PythonBuilder": "python_builder",
    "TritonBuilder": "triton_builder",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
