"""Builders: the kit's back ends (:mod:`.base`, :mod:`.python`, :mod:`.tvm_ffi`,
:mod:`.torch_ext`) and the organizers' builder classes (``PythonBuilder``, ``TritonBuilder``,
``CUDABuilder``: ``can_build``/``build(definition, solution)``/``clear_cache`` over the same
back ends). The organizers' classes load on first use, so importing a back end stays light.
"""

from __future__ import annotations

from fib_core._lazy import lazy_attributes

__all__ = ["CUDABuilder", "PythonBuilder", "TritonBuilder"]

_LAZY = {
    "CUDABuilder": f"{__name__}.cuda_builder",
    "PythonBuilder": f"{__name__}.python_builder",
    "TritonBuilder": f"{__name__}.triton_builder",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
