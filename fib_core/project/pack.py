"""Pack ``solution/<language>/`` into a FlashInfer-Trace Solution (``solution.json``).

Packing checks what can be checked without a GPU or a build, so a contestant learns about a
wrong entry point or signature in a second rather than after a benchmark run:
- the entry file exists and defines (Python/Triton) or exports (CUDA) the entry function;
- for Python/Triton, the function's parameters fit the definition and the
  ``destination_passing_style`` setting (read from the source with ``ast``, without importing
  it, so packing works on machines without triton or a GPU).

Example::

    from fib_core.project.config import load_config
    from fib_core.project.pack import pack_solution
    solution = pack_solution(load_config("config.toml"))
    print(solution.name, [s.path for s in solution.sources])
"""

from __future__ import annotations

import ast
import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath
from typing import TYPE_CHECKING

from fib_core.compile.signature import check_signature
from fib_core.data import Solution
from fib_core.data.containment import link_escape
from fib_core.errors import ConfigError

if TYPE_CHECKING:
    from fib_core.data import Definition, Solution
    from fib_core.project.config import KitConfig

# Build outputs, caches and editor litter: never part of a solution.
EXCLUDED_DIRS = {"__pycache__", "build", "dist", ".git", ".ipynb_checkpoints", ".pytest_cache"}
EXCLUDED_FILES = ("*.pyc", "*.pyo", "*.so", "*.o", "*.a", "*.obj", "*.ptx", "*.cubin",
                  "*.fatbin", "*.ninja_deps", "*.ninja_log", ".ninja*", "*.lock", "*~", "*.swp",
                  "#*#", ".DS_Store", "starter.toml")


@dataclass(frozen=True)
class PackedFile:
    path: str
    size: int


def excluded_dir(name: str) -> bool:
    """Whether a folder of this name is left out of a solution, with all it holds (a cache,
    a build output, a hidden folder). Example: ``excluded_dir("__pycache__") is True``."""
    return name in EXCLUDED_DIRS or name.startswith(".")


def _in_excluded_dir(rel: PurePath) -> bool:
    return any(excluded_dir(part) for part in rel.parts[:-1])


def packable(rel: PurePath) -> bool:
    """Whether a file at ``rel`` (relative to the source folder) is part of a solution: not
    hidden, not a cache or build output, not inside such a folder. What :func:`collect_sources`
    packs and what ``run_local.py --watch`` watches.

    >>> packable(PurePath("kernel.py")), packable(PurePath("__pycache__/kernel.pyc"))
    (True, False)
    """
    if _in_excluded_dir(rel):
        return False
    if rel.name.startswith(".") or rel.parts[0].endswith(".egg-info"):
        return False
    return not any(fnmatch.fnmatch(rel.name, pat) for pat in EXCLUDED_FILES)


def collect_sources(source_dir: Path) -> list[tuple[str, str]]:
    """(relative POSIX path, text) of every source file under ``source_dir``, sorted.

    Hidden files and folders, caches and build outputs are skipped; a binary file that is not a
    known build output is an error (solutions are text).
    """
    if not source_dir.is_dir():
        raise ConfigError(
            f"{source_dir}: source folder not found; put your kernel there or run "
            f"`python scripts/switch_track.py` to install a starter"
        )
    files: list[tuple[str, str]] = []
    for path in sorted(source_dir.rglob("*")):
        rel = path.relative_to(source_dir)
        if _in_excluded_dir(rel):
            continue
        if path.is_symlink() and path.is_dir() and not rel.name.startswith("."):
            target = link_escape(path, source_dir)
            if target is not None:  # its files would be left out without a word
                raise ConfigError(
                    f"{path}: a symbolic link to the folder {target}, outside {source_dir}; a "
                    "solution packs only its own files (copy the folder in or remove the link)"
                )
        if not path.is_file() or not packable(rel):
            continue
        target = link_escape(path, source_dir)
        if target is not None:
            raise ConfigError(
                f"{path}: a symbolic link to {target}, outside {source_dir}; a solution packs "
                "only its own files (copy the file into the folder or remove the link)"
            )
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError(
                f"{path}: not a UTF-8 text file; a solution holds source files only "
                "(delete it or move it out of the solution folder)"
            ) from None
        # The organizers' schema rejects empty contents; an empty __init__.py is common.
        files.append((PurePosixPath(rel).as_posix(), text if text else "\n"))
    if not files:
        raise ConfigError(f"{source_dir}: no source files to pack")
    return files


def pack_solution(cfg: KitConfig, definition: Definition | None = None) -> Solution:
    """Build the Solution for ``cfg``; checks the signature when ``definition`` is given."""
    sources = collect_sources(cfg.source_dir)
    by_path = dict(sources)
    entry_file = cfg.build.entry_file
    if entry_file not in by_path:
        listing = ", ".join(sorted(by_path)) or "nothing"
        raise ConfigError(
            f"{cfg.path}: [{cfg.table}] entry_point file '{entry_file}' is not in "
            f"{cfg.source_dir} (found: {listing})"
        )
    check_entry_function(cfg, by_path[entry_file], definition)
    spec = {
        "language": cfg.build.language,
        "target_hardware": list(cfg.build.target_hardware),
        "entry_point": cfg.build.entry_point,
        "dependencies": list(cfg.build.dependencies),
        "destination_passing_style": cfg.build.destination_passing_style,
    }
    if cfg.build.language == "cuda":
        spec["binding"] = cfg.build.binding
    return Solution.from_dict(
        {
            "name": cfg.solution.name,
            "definition": cfg.solution.definition,
            "author": cfg.solution.author,
            "description": cfg.solution.description,
            "spec": spec,
            "sources": [{"path": p, "content": c} for p, c in sources],
        }
    )


def check_entry_function(cfg: KitConfig, source: str, definition: Definition | None) -> None:
    """Raise when the entry function is missing or its parameters do not fit the definition."""
    fn = cfg.build.entry_function
    where = f"{cfg.source_dir / cfg.build.entry_file}"
    if cfg.build.language == "cuda":
        if not _cuda_exports(source, fn, cfg.build.binding):
            how = (
                f"TVM_FFI_DLL_EXPORT_TYPED_FUNC({fn}, ...)"
                if cfg.build.binding == "tvm-ffi"
                else f'm.def("{fn}", ...) in a PYBIND11_MODULE / TORCH_LIBRARY block'
            )
            raise ConfigError(f"{where}: does not export '{fn}'; add {how}")
        return
    try:
        tree = ast.parse(source, filename=where)
    except SyntaxError as err:
        raise ConfigError(f"{where}:{err.lineno}: syntax error: {err.msg}") from None
    func = next(
        (
            node
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == fn
        ),
        None,
    )
    if func is None:
        names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        raise ConfigError(
            f"{where}: no top-level function '{fn}' (found: {', '.join(names) or 'none'}); "
            f"fix [{cfg.table}] entry_point in {cfg.path.name}"
        )
    if definition is None or func.args.vararg is not None:
        return

    params = [a.arg for a in func.args.posonlyargs + func.args.args]
    required = params[: len(params) - len(func.args.defaults)]
    # Parameters with defaults may stay unfilled: check against the required ones.
    check_signature(None, definition, cfg.build.destination_passing_style, fn, params=required)


def _cuda_exports(source: str, fn: str, binding: str) -> bool:
    name = re.escape(fn)
    if binding == "tvm-ffi":
        return re.search(rf"TVM_FFI_DLL_EXPORT_TYPED_FUNC\s*\(\s*{name}\s*,", source) is not None
    return re.search(rf"""\.def\s*\(\s*"{name}"|\b{name}\s*\(""", source) is not None


def describe(solution: Solution) -> list[PackedFile]:
    """What was packed, for the summary line the pack script prints."""
    return [PackedFile(s.path, len(s.content.encode())) for s in solution.sources]
