"""Python and Triton solutions: write the sources as a package, import the entry module.

Each build gets a private folder and a unique package name, so two solutions (or two versions
of one) never share ``sys.modules`` entries, and ``from .util import x`` between the solution's
files works. Triton's JIT reads kernel source when a kernel is decorated, i.e. at import, so
the folder can go away on ``close()``.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from fib_core.errors import BuildError
from fib_core.paths import private_temp_dir, remove_private_dir

from ..options import BuildOptions
from .base import Built, entry_parts, language_of, write_sources

_COUNTER = itertools.count()


class PythonBuilder:
    """Builds ``language = python`` and ``language = triton`` solutions."""

    name = "python"

    def can_build(self, solution: Any) -> bool:
        return language_of(solution) in ("python", "triton")

    def build(self, solution: Any, definition: Any, options: BuildOptions) -> Built:
        entry_file, func = entry_parts(solution)
        if not entry_file.endswith(".py"):
            raise BuildError(
                f"{solution.name}: entry_point file '{entry_file}' is not a .py file; a "
                f"{language_of(solution)} solution's entry_point is like 'kernel.py::run'"
            )
        _check_triton_can_run(solution)
        root = private_temp_dir("fib-py-")  # removed by close(), else at exit
        package = f"fib_solution_{solution.hash()[:12]}_{os.getpid()}_{next(_COUNTER)}"
        pkg_dir = root / package
        try:
            pkg_dir.mkdir()
            write_sources(solution, pkg_dir)
            (pkg_dir / "__init__.py").touch(exist_ok=True)
            module = _import_entry(package, pkg_dir, entry_file, solution.name)
        except BaseException:
            _unload(package)
            remove_private_dir(root)
            raise
        fn = getattr(module, func, None)
        if not callable(fn):
            _unload(package)
            remove_private_dir(root)
            defined = sorted(n for n, v in vars(module).items()
                             if callable(v) and not n.startswith("_")
                             and getattr(v, "__module__", None) == module.__name__)
            raise BuildError(
                f"{solution.name}: {entry_file} defines no function '{func}' (entry_point "
                f"'{entry_file}::{func}'); functions found: {', '.join(defined) or 'none'}"
            )

        def cleanup() -> None:
            _unload(package)
            remove_private_dir(root)

        meta = {"builder": self.name, "language": language_of(solution), "package": package,
                "build_dir": str(pkg_dir), "cached": False}
        return Built(fn=fn, meta=meta, cleanup=cleanup)


def _check_triton_can_run(solution: Any) -> None:
    """A Triton solution built in this process on a machine without a CUDA GPU fails at its
    first launch deep inside Triton ("0 active drivers"); say what to do now instead. Triton
    picks its interpreter when a kernel is decorated, so the variable must be set before the
    build imports the solution (the kit's own CPU runs set it for their workers)."""
    if language_of(solution) != "triton" or os.environ.get("TRITON_INTERPRET", "") not in ("", "0"):
        return
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    if not torch.cuda.is_available():
        raise BuildError(
            f"{solution.name}: a Triton solution needs a CUDA GPU, and torch sees none here; "
            "to run it on the CPU with Triton's interpreter (slow, for correctness), set "
            "TRITON_INTERPRET=1 in the environment before it is built"
        )


def _import_entry(package: str, pkg_dir: Path, entry_file: str, solution_name: str) -> Any:
    """Import ``package`` from ``pkg_dir`` and then its entry module; errors -> BuildError."""
    spec = importlib.util.spec_from_file_location(
        package, pkg_dir / "__init__.py", submodule_search_locations=[str(pkg_dir)]
    )
    assert spec is not None and spec.loader is not None
    dotted = package + "." + entry_file[: -len(".py")].replace("/", ".")
    try:
        pkg = importlib.util.module_from_spec(spec)
        sys.modules[package] = pkg
        spec.loader.exec_module(pkg)
        return importlib.import_module(dotted)
    except Exception as exc:
        raise _import_error(exc, pkg_dir, solution_name) from None


def _import_error(exc: Exception, pkg_dir: Path, solution_name: str) -> BuildError:
    """The failing line in the contestant's own file, without the kit's frames around it."""
    prefix = str(pkg_dir) + os.sep
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f"{exc.filename.replace(prefix, '')}:{exc.lineno}"
        lines = [f"{where}: SyntaxError: {exc.msg}"]
        if exc.text:
            lines.append("    " + exc.text.strip())
    else:
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if f.filename.startswith(prefix)]
        first = str(exc).splitlines()[0] if str(exc) else ""
        message = f"{type(exc).__name__}: {first}".rstrip(": ")
        if frames:
            last = frames[-1]
            lines = [f"{last.filename.replace(prefix, '')}:{last.lineno}: {message}"]
        else:
            lines = [message]
    err = BuildError("\n".join([f"{solution_name}: importing the solution failed", *("  " + x for x in lines)]))
    err.compiler_lines = lines  # type: ignore[attr-defined]
    return err


def _unload(package: str) -> None:
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]
