"""CUDA/C++ solutions with ``binding = "tvm-ffi"``: one shared library via apache-tvm-ffi.

All ``.cu``/``.cpp`` sources are compiled into one module by ``tvm_ffi.cpp.build`` (ninja +
nvcc/c++) in a private folder that the cache publishes atomically. The entry function is the
symbol exported with ``TVM_FFI_DLL_EXPORT_TYPED_FUNC(name, impl)``. We compile with
``TVM_FFI_DLL_EXPORT_INCLUDE_METADATA=1`` so the module records each export's type schema: that
lets us check the parameter count and kinds against the definition before the first call.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from fib_core.errors import BuildError, SignatureError

from ..cache import build_slot, cached_build
from ..options import BuildOptions
from .base import Built, entry_parts, language_of, options_key, write_sources
from .native import (
    SOURCES_DIR,
    NativePlan,
    absolute_includes,
    native_build_failed,
    plan_native,
    scoped_env,
)

METADATA_FLAG = "-DTVM_FFI_DLL_EXPORT_INCLUDE_METADATA=1"
_EXPORT = re.compile(r"TVM_FFI_DLL_EXPORT_TYPED_FUNC\s*\(\s*(\w+)")


class TvmFfiBuilder:
    """Builds ``language = cuda | cpp`` with ``binding = "tvm-ffi"`` (the default binding)."""

    name = "tvm-ffi"

    def can_build(self, solution: Any) -> bool:
        return language_of(solution) in ("cuda", "cpp") and solution.spec.binding == "tvm-ffi"

    def build(self, solution: Any, definition: Any, options: BuildOptions) -> Built:
        try:
            # Imported here: tvm_ffi is optional (takes ~4 s to load); only tvm-ffi builds need it.
            import tvm_ffi
            import tvm_ffi.cpp
        except ImportError:
            raise BuildError(
                f"{solution.name}: binding 'tvm-ffi' needs apache-tvm-ffi: run "
                "`pip install 'apache-tvm-ffi[cpp]' ninja` (or `pip install -e .[cuda]`)"
            ) from None
        plan = plan_native(solution, options, self.name)
        key = options_key({**plan.key_fields, "tvm_ffi": tvm_ffi.__version__, "layout": 1})
        slot = build_slot(options.resolved_cache_dir(), solution.hash(), key)
        module_name = f"fib_{solution.hash()[:12]}"

        def produce(tmp: Path) -> dict[str, Any]:
            return _compile(solution, plan, module_name, tmp, slot)

        manifest, cached = cached_build(slot, produce, options.lock_timeout_s)
        library = slot / manifest["library"]
        try:
            module = tvm_ffi.load_module(str(library))
        except Exception as exc:
            raise BuildError(
                f"{solution.name}: cannot load the built library {library} ({exc}); delete "
                f"{slot} to rebuild it"
            ) from None
        fn, params = _entry_function(module, solution, definition)
        holder = {"module": module}
        meta = {
            "builder": self.name,
            "language": language_of(solution),
            "build_dir": str(slot),
            "library": str(library),
            "cached": cached,
            "archs": manifest.get("archs", []),
            "param_types": params,
        }
        return Built(
            fn=fn,
            meta=meta,
            cleanup=holder.clear,
            params=[f"arg{i}: {t}" for i, t in enumerate(params)] if params else None,
        )


def _compile(solution: Any, plan: NativePlan, module_name: str, tmp: Path, slot: Path) -> dict:
    # Imported here: tvm_ffi is optional (only tvm-ffi builds need it) and takes ~4 s to load.
    import tvm_ffi.cpp

    src_root = tmp / SOURCES_DIR
    write_sources(solution, src_root)
    user_cflags = list(plan.key_fields["extra_cflags"])
    env = {"TVM_FFI_CUDA_ARCH_LIST": " ".join(a.dotted for a in plan.archs)} if plan.archs else {}
    try:
        with scoped_env(env):
            library = tvm_ffi.cpp.build(
                module_name,
                sources=[str(src_root / p) for p in plan.sources],
                extra_cflags=[METADATA_FLAG, *user_cflags],
                extra_cuda_cflags=[METADATA_FLAG, *plan.key_fields["extra_cuda_cflags"]],
                extra_ldflags=list(plan.key_fields["extra_ldflags"]),
                extra_include_paths=absolute_includes(plan, src_root),
                build_directory=str(tmp / "build"),
                backend="cuda" if plan.has_cuda else None,
            )
    except Exception as exc:  # ninja failures arrive as RuntimeError with the full output
        raise native_build_failed(solution, "tvm-ffi", exc, src_root, slot) from None
    return {
        "builder": "tvm-ffi",
        "library": str(Path(library).relative_to(tmp)),
        "module": module_name,
        "archs": [a.sm for a in plan.archs],
        "settings": plan.key_fields,
    }


def _entry_function(module: Any, solution: Any, definition: Any) -> tuple[Any, list[str] | None]:
    entry_file, func = entry_parts(solution)
    if not module.implements_function(func):
        exported = sorted({m for s in solution.sources for m in _EXPORT.findall(s.content)})
        raise BuildError(
            f"{solution.name}: the built module exports no function '{func}' (entry_point "
            f"'{entry_file}::{func}'); export it with TVM_FFI_DLL_EXPORT_TYPED_FUNC({func}, "
            f"your_function); exported now: {', '.join(exported) or 'none'}"
        )
    fn = module.get_function(func)
    params = _schema_params(module, func)
    if params is not None:
        check_param_kinds(params, definition, solution.spec.destination_passing_style, func)
    return fn, params


def _schema_params(module: Any, func: str) -> list[str] | None:
    """The export's parameter types (``"DLTensor*"``, ``"float"``, ``"Optional<...>"``...)."""
    try:
        meta = module.get_function_metadata(func)
        schema = json.loads(meta["type_schema"])
        return [_type_name(p) for p in schema["named_args"]["params"]]
    except Exception:  # built without metadata, or a schema format we do not know
        return None


def _type_name(node: dict) -> str:
    args = node.get("args")
    return f"{node['type']}<{', '.join(_type_name(a) for a in args)}>" if args else node["type"]


_TENSORS = ("DLTensor*", "ffi.Tensor")


def check_param_kinds(params: list[str], definition: Any, dps: bool, func: str) -> None:
    """Each parameter must accept what the engine passes at its position.

    Tensors -> ``TensorView``/``Tensor``; a tensor input that may be None ->
    ``Optional<TensorView>``; float scalars -> ``double``; int scalars -> ``int64_t``.
    Count mismatches are left to the generic signature check (it names the config key).
    """
    specs = list(definition.inputs.items()) + (list(definition.outputs.items()) if dps else [])
    if len(params) != len(specs):
        return
    for i, ((name, spec), ptype) in enumerate(zip(specs, params, strict=True)):
        want = _declaration_for(spec)
        if ptype == "Any" or _accepts(ptype, spec):
            continue
        raise SignatureError(
            f"{func}: parameter {i} ({name}) is declared {ptype}, but the definition passes "
            f"{_describe(spec)}: declare it `{want}`"
        )


def _accepts(ptype: str, spec: Any) -> bool:
    if spec.shape is None:
        if spec.dtype.startswith("float"):
            return ptype == "float"
        if spec.dtype == "bool":
            return ptype in ("bool", "int")
        return ptype in ("int", "float")
    if getattr(spec, "optional", False):
        return ptype.startswith("Optional<") and any(t in ptype for t in _TENSORS)
    return ptype in _TENSORS or (
        ptype.startswith("Optional<") and any(t in ptype for t in _TENSORS)
    )


def _declaration_for(spec: Any) -> str:
    if spec.shape is None:
        if spec.dtype.startswith("float"):
            return "double"
        return "bool" if spec.dtype == "bool" else "int64_t"
    if getattr(spec, "optional", False):
        return "tvm::ffi::Optional<tvm::ffi::TensorView>"
    return "tvm::ffi::TensorView"


def _describe(spec: Any) -> str:
    if spec.shape is None:
        return f"a {spec.dtype} scalar"
    return (
        f"a {spec.dtype} tensor that may be None"
        if getattr(spec, "optional", False)
        else f"a {spec.dtype} tensor"
    )
