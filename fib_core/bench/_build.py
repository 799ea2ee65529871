"""Bridge to :func:`fib_core.compile.build`, with a small fallback for Python/Triton sources.

The engine only needs ``build(solution, definition, options) -> Runnable``. While the compile
package is absent (or lacks ``build``), Python and Triton solutions are still loaded here by
importing the entry file from a private folder, so the engine and its tests do not depend on
the order in which packages land. CUDA/C++ solutions always need the compile package.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from fib_core.errors import BuildError


def build_solution(solution: Any, definition: Any, options: Any = None) -> Any:
    """Build through fib_core.compile when it provides ``build``; else the local fallback."""
    try:
        from fib_core.compile import build  # type: ignore[attr-defined]
    except ImportError:
        return _fallback_build(solution, definition)
    if isinstance(build, ModuleType):  # the package does not re-export it (yet)
        build = getattr(build, "build", None)
    if not callable(build):
        return _fallback_build(solution, definition)
    return build(solution, definition, options)


def _fallback_build(solution: Any, definition: Any) -> Any:
    language = getattr(solution.spec.language, "value", solution.spec.language)
    if language not in ("python", "triton"):
        raise BuildError(
            f"solution {solution.name!r}: language {language!r} needs fib_core.compile.build, "
            "which is not available in this installation"
        )
    folder = Path(tempfile.mkdtemp(prefix=f"fib-src-{solution.name[:40]}-"))
    for src in solution.sources:
        target = folder / src.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(src.content)
    entry_file, _, func_name = solution.spec.entry_point.partition("::")
    module_name = f"fib_solution_{abs(hash((solution.name, str(folder))))}"
    spec = importlib.util.spec_from_file_location(module_name, folder / entry_file)
    if spec is None or spec.loader is None:
        raise BuildError(f"solution {solution.name!r}: cannot import {entry_file!r}")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(folder))
    try:
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    except Exception as err:
        raise BuildError(
            f"solution {solution.name!r}: importing {entry_file} failed: {type(err).__name__}: {err}"
        ) from None
    finally:
        sys.path.remove(str(folder))
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise BuildError(f"solution {solution.name!r}: {entry_file} has no function {func_name!r}")
    from fib_core.compile.runnable import Runnable

    return Runnable(
        fn,
        dps=solution.spec.destination_passing_style,
        definition=definition,
        solution=solution,
        meta={"builder": "bench-fallback-python"},
        cleanup=lambda: shutil.rmtree(folder, ignore_errors=True),
    )
