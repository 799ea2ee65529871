"""``build()``: pick the builder from the spec, build, check the signature, wrap in a Runnable."""

from __future__ import annotations

from typing import Any

from fib_core.errors import BuildError

from .builders.base import find_builder, register_builder, registered_builders
from .builders.python import PythonBuilder
from .builders.torch_ext import TorchExtensionBuilder
from .builders.tvm_ffi import TvmFfiBuilder
from .options import BuildOptions
from .runnable import Runnable
from .signature import check_signature

if not registered_builders():
    register_builder(PythonBuilder())
    register_builder(TvmFfiBuilder())
    register_builder(TorchExtensionBuilder())


def build(solution: Any, definition: Any, options: BuildOptions | None = None) -> Runnable:
    """Build ``solution`` for ``definition``; raises BuildError or SignatureError, never runs it."""
    options = options if options is not None else BuildOptions()
    if solution.definition != definition.name:
        raise BuildError(
            f"{solution.name}: written for definition '{solution.definition}', asked to build "
            f"for '{definition.name}'; set definition under [solution] in config.toml"
        )
    builder = find_builder(solution)
    built = builder.build(solution, definition, options)
    dps = bool(solution.spec.destination_passing_style)
    try:
        check_signature(built.fn, definition, dps, name=solution.spec.entry_function,
                        params=built.params)
    except BaseException:
        if built.cleanup is not None:
            built.cleanup()
        raise
    return Runnable(built.fn, dps=dps, definition=definition, solution=solution,
                    meta=built.meta, cleanup=built.cleanup)
