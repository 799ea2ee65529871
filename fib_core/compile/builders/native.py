"""What the two CUDA/C++ builders share: source selection, include folders, arch, env."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fib_core.environ import scoped_environ
from fib_core.errors import BuildError

from ..arch import CudaArch, resolve_cuda_arch
from ..deps import dependency_include_dirs
from ..diagnostics import compile_error
from ..options import BuildOptions
from ..toolchain import ensure_host_compiler, ensure_ninja, find_cuda_home, nvcc_version
from .base import entry_parts, language_of

COMPILED_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")
SOURCES_DIR = "src"

_ENV_LOCK = threading.Lock()


@dataclass
class NativePlan:
    """Everything decided before compiling; ``key_fields`` feed the cache key."""

    sources: list[str]  # relative paths of the files to compile
    has_cuda: bool
    archs: list[CudaArch] = field(default_factory=list)
    cuda_home: Path | None = None
    include_dirs: list[str] = field(default_factory=list)  # absolute, or relative to src/
    key_fields: dict[str, Any] = field(default_factory=dict)


def plan_native(solution: Any, options: BuildOptions, binding: str) -> NativePlan:
    """Check tools and settings up front, so a missing nvcc is reported before any work."""
    entry_file, _ = entry_parts(solution)
    sources = [s.path for s in solution.sources if s.path.lower().endswith(COMPILED_SUFFIXES)]
    if not sources:
        raise BuildError(
            f"{solution.name}: no .cu/.cpp/.cc/.c file among the sources "
            f"({', '.join(s.path for s in solution.sources)}); a {binding} solution compiles those"
        )
    has_cuda = any(p.lower().endswith(".cu") for p in sources)
    ensure_ninja()
    ensure_host_compiler()
    plan = NativePlan(sources=sources, has_cuda=has_cuda)
    if has_cuda:
        plan.cuda_home = find_cuda_home()
        plan.archs = resolve_cuda_arch(options.cuda_arch)
    names = {s.path for s in solution.sources}
    for d in options.include_dirs:
        in_sources = any(n.startswith(d.rstrip("/") + "/") for n in names)
        plan.include_dirs.append(
            d if in_sources and not os.path.isabs(d) else str(Path(d).resolve())
        )
    plan.include_dirs += [str(p) for p in dependency_include_dirs(list(solution.spec.dependencies))]
    plan.key_fields = {
        "binding": binding,
        "archs": [a.sm for a in plan.archs],
        "nvcc": nvcc_version(plan.cuda_home) if plan.cuda_home else None,
        "extra_cuda_cflags": options.extra_cuda_cflags,
        "extra_cflags": options.extra_cflags,
        "extra_ldflags": options.extra_ldflags,
        "include_dirs": plan.include_dirs,
    }
    return plan


def absolute_includes(plan: NativePlan, src_root: Path) -> list[str]:
    """The source root first (so ``#include "util.cuh"`` works from any file), then the rest."""
    return [str(src_root)] + [
        d if os.path.isabs(d) else str(src_root / d) for d in plan.include_dirs
    ]


def native_build_failed(
    solution: Any, tool: str, exc: Exception, src_root: Path, slot: Path
) -> BuildError:
    """The BuildError of a failed native build: one summary line naming the solution and the
    tool, then the compiler's own lines with the private source folder stripped; the full
    output is saved beside the build slot for the user to read."""
    return compile_error(
        f"{solution.name}: {language_of(solution)} build failed ({tool})",
        str(exc),
        strip_prefixes=(str(src_root),),
        log_path=slot.parent / f"{slot.name}.failed.log",
    )


@contextmanager
def scoped_env(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for one build and restore them after.

    The back ends read the target arch from the environment only; the lock keeps two threads
    of this process from building with each other's settings.
    """
    with _ENV_LOCK, scoped_environ(values):
        yield
