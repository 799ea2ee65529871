"""CUDA/C++ solutions with ``binding = "torch"``: ``torch.utils.cpp_extension``.

The entry ``name`` is either a pybind11 function (``PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{ m.def("name", &impl); }``) or an operator registered with ``TORCH_LIBRARY(ns, m)`` and
reached as ``torch.ops.ns.name``. The arch goes in as explicit ``-gencode`` flags, which makes
torch skip its own ``TORCH_CUDA_ARCH_LIST`` detection (that one needs a GPU).

A loaded extension cannot be unloaded, and loading a TORCH_LIBRARY twice fails, so modules are
kept per process by build folder and reused.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
from pathlib import Path
from typing import Any

from fib_core.errors import BuildError

from ..cache import build_slot, cached_build
from ..options import BuildOptions
from ..toolchain import nvcc_version
from .base import Built, entry_parts, language_of, options_key, write_sources
from .native import (
    SOURCES_DIR,
    NativePlan,
    absolute_includes,
    native_build_failed,
    plan_native,
)

_PYBIND = re.compile(r"PYBIND11_MODULE\s*\(")
_TORCH_LIBRARY = re.compile(r"TORCH_LIBRARY(?:_FRAGMENT)?\s*\(\s*(\w+)\s*,")
_LOADED: dict[str, Any] = {}


class TorchExtensionBuilder:
    """Builds ``language = cuda | cpp`` with ``binding = "torch"``."""

    name = "torch"

    def can_build(self, solution: Any) -> bool:
        return language_of(solution) in ("cuda", "cpp") and solution.spec.binding == "torch"

    def build(self, solution: Any, definition: Any, options: BuildOptions) -> Built:
        # Imported here: torch takes ~3 s to load, and importing this module does not need it.
        import torch

        kind, namespace = _binding_kind(solution)
        plan = plan_native(solution, options, self.name)
        if plan.has_cuda:
            _check_torch_cuda(torch, plan)
        key = options_key({**plan.key_fields, "torch": torch.__version__, "layout": 1})
        slot = build_slot(options.resolved_cache_dir(), solution.hash(), key)
        module_name = f"fib_{solution.hash()[:12]}_{key[:8]}"

        def produce(tmp: Path) -> dict[str, Any]:
            _LOADED[str(slot)] = _compile(solution, plan, module_name, kind, tmp, slot)
            return {
                "builder": self.name,
                "library": f"build/{module_name}.so",
                "module": module_name,
                "kind": kind,
                "namespace": namespace,
                "archs": [a.sm for a in plan.archs],
                "settings": plan.key_fields,
            }

        manifest, cached = cached_build(slot, produce, options.lock_timeout_s)
        if str(slot) not in _LOADED:  # built by another process (or an earlier session)
            _LOADED[str(slot)] = _load(manifest, slot)
        module = _LOADED[str(slot)]
        fn = _entry_function(module, manifest, solution)
        meta = {
            "builder": self.name,
            "language": language_of(solution),
            "build_dir": str(slot),
            "library": str(slot / manifest["library"]),
            "cached": cached,
            "archs": manifest.get("archs", []),
        }
        return Built(fn=fn, meta=meta)


def _binding_kind(solution: Any) -> tuple[str, str | None]:
    text = "\n".join(s.content for s in solution.sources)
    if _PYBIND.search(text):
        return "pybind", None
    m = _TORCH_LIBRARY.search(text)
    if m:
        return "torch_library", m.group(1)
    _, func = entry_parts(solution)
    raise BuildError(
        f"{solution.name}: binding 'torch' but no PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) or "
        f"TORCH_LIBRARY(ns, m) in the sources; add e.g. PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) "
        f'{{ m.def("{func}", &{func}); }}'
    )


def _check_torch_cuda(torch: Any, plan: NativePlan) -> None:
    """torch refuses CUDA extensions on a CPU-only torch or with a different nvcc major."""
    if torch.version.cuda is None:
        raise BuildError(
            f"binding 'torch' with .cu sources needs a CUDA build of torch (this torch "
            f'{torch.__version__} has none); install a CUDA torch or use binding = "tvm-ffi" '
            "under [build] in config.toml"
        )
    have = nvcc_version(plan.cuda_home) if plan.cuda_home else ""
    if have and have.split(".")[0] != torch.version.cuda.split(".")[0]:
        raise BuildError(
            f"binding 'torch': nvcc in {plan.cuda_home} is CUDA {have} but torch was built with "
            f"CUDA {torch.version.cuda}; set CUDA_HOME to a CUDA {torch.version.cuda.split('.')[0]}.x "
            'toolkit or use binding = "tvm-ffi" under [build] in config.toml'
        )
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch.utils.cpp_extension as ce

    if not ce.CUDA_HOME:  # computed at import, before we found the real toolkit
        ce.CUDA_HOME = str(plan.cuda_home)


def _compile(solution: Any, plan: NativePlan, name: str, kind: str, tmp: Path, slot: Path) -> Any:
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    from torch.utils import cpp_extension

    src_root = tmp / SOURCES_DIR
    write_sources(solution, src_root)
    (tmp / "build").mkdir()
    cuda_flags = [a.gencode for a in plan.archs] + list(plan.key_fields["extra_cuda_cflags"])
    try:
        return cpp_extension.load(
            name,
            sources=[str(src_root / p) for p in plan.sources],
            extra_cflags=["-O2", *plan.key_fields["extra_cflags"]],
            extra_cuda_cflags=["-O2", *cuda_flags] if plan.has_cuda else None,
            extra_ldflags=list(plan.key_fields["extra_ldflags"]),
            extra_include_paths=absolute_includes(plan, src_root),
            build_directory=str(tmp / "build"),
            with_cuda=plan.has_cuda,
            is_python_module=kind == "pybind",
            verbose=False,
        )
    except Exception as exc:
        raise native_build_failed(solution, "torch cpp_extension", exc, src_root, slot) from None


def _load(manifest: dict, slot: Path) -> Any:
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    library = slot / manifest["library"]
    if manifest["kind"] == "torch_library":
        torch.ops.load_library(str(library))
        return None
    loader = importlib.machinery.ExtensionFileLoader(manifest["module"], str(library))
    spec = importlib.util.spec_from_file_location(manifest["module"], library, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _entry_function(module: Any, manifest: dict, solution: Any) -> Any:
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    entry_file, func = entry_parts(solution)
    if manifest["kind"] == "torch_library":
        namespace = getattr(torch.ops, manifest["namespace"])
        try:
            fn = getattr(namespace, func)
        except (AttributeError, RuntimeError):
            fn = None
        where = f"torch.ops.{manifest['namespace']}"
    else:
        fn = getattr(module, func, None)
        where = "the PYBIND11_MODULE"
    if fn is None:
        raise BuildError(
            f"{solution.name}: {where} defines no '{func}' (entry_point '{entry_file}::{func}'); "
            f'register it, e.g. m.def("{func}", &{func})'
        )
    return fn
