"""The pattern shared by the adapters of one FlashInfer function (GDN decode, FP8 MoE).

Such an entry point is a plain function: its wrapper binds the call's arguments, asks the
adapter whether the call fits the definition's constant sizes and options, and either hands the
bound arguments to the adapter's :meth:`FunctionAdapter.call` (which routes through ``apply``
with FlashInfer's function as the fallback) or calls FlashInfer unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from fib_core.apply.binding import ArgBinder

from ...patch_manager import PatchSpec


class FunctionAdapter:
    """Base of the function adapters: subclasses set ``DEF_NAME`` (the definition a fitting
    call becomes), ``NAME`` (the adapter's report name), ``FUNCTION`` and ``MODULE`` (the
    function's name and the FlashInfer submodule defining it), and implement :meth:`fits` and
    :meth:`call`."""

    DEF_NAME: str = ""
    NAME: str = ""
    FUNCTION: str = ""
    MODULE: str = ""

    def __init__(self) -> None:
        self.def_name = self.DEF_NAME

    def targets(self) -> list[PatchSpec]:
        """The function in its submodule and at the package root, where FlashInfer re-exports
        it: a caller may hold either name."""
        paths = (f"flashinfer.{self.MODULE}.{self.FUNCTION}", f"flashinfer.{self.FUNCTION}")
        return [PatchSpec(path, "function", self.NAME) for path in paths]

    @staticmethod
    def fits(bound: dict[str, Any]) -> bool:
        """True when the bound call matches the definition (sizes, options)."""
        raise NotImplementedError

    def call(
        self, bound: dict[str, Any], orig: Callable[..., Any], args: tuple, kwargs: dict[str, Any]
    ) -> Any:
        """The result of a fitting call: routed through apply, ``orig`` as the fallback."""
        raise NotImplementedError

    def make_wrapper(self, spec: PatchSpec, orig: Callable[..., Any]) -> Callable[..., Any]:
        binder = ArgBinder(orig)

        @functools.wraps(orig)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = binder.bind(args, kwargs)
            if not self.fits(bound):
                return orig(*args, **kwargs)
            return self.call(bound, orig, args, kwargs)

        return wrapper
