"""The import graph of fib_core's packages: no cycle, and no package importing one above it.

Every module is parsed (not imported), and every import in it counts: at the top, inside a
function, under ``TYPE_CHECKING``. Each import is mapped to the top-level node it lands in:
a package (``fib_core/bench``, ``fib_core/dataset``, ...), a single-file module
(``fib_core/paths.py`` is the node ``paths``) or the package's own ``__init__.py`` (the node
``fib_core``). Imports made from strings (``importlib``, the lazy attributes of a package's
face) are not imports here: they are how a face stays cheap, and they name no module the face
depends on to load.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fib_core"

# The layering of docs/design.md ("The map"): each node imports only nodes listed after it.
# Keep the two in step: a new package goes into both, at the place its imports allow.
LAYERS = [
    "__main__",
    "cli",
    "cli_compat",
    "commands",
    "validate",
    "serve",
    "project",
    "report",
    "baselines",
    "utils",
    "bench",
    "fib_core",  # the package's face: binds fib.apply eagerly, everything else lazily
    "integration",
    "tracer",
    "apply",
    "compile",
    "dataset",
    "checking",
    "tracing_rules",
    "data",
    "gitcmd",
    "errors",
    "paths",
    "environ",
    "atomic",
    "_lazy",
]


def _module_parts(path: Path) -> list[str]:
    """Dotted name of a module file, as a list: fib_core/bench/__init__.py -> [fib_core, bench]."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _node(dotted: list[str]) -> str:
    """The top-level node a fib_core module belongs to."""
    if len(dotted) == 1:
        return "fib_core"
    return dotted[1]


def _is_submodule(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


def _imported(path: Path, tree: ast.AST) -> list[tuple[int, list[str]]]:
    """(line, dotted module) of every fib_core module the file imports."""
    here = _module_parts(path)
    package = here if path.name == "__init__.py" else here[:-1]
    found: list[tuple[int, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = base + (node.module.split(".") if node.module else [])
            if module == ["fib_core"]:  # `from fib_core import x`: x may be a module
                found += [
                    (node.lineno, ["fib_core", a.name] if _is_submodule(a.name) else module)
                    for a in node.names
                ]
            else:
                found.append((node.lineno, module))
    return [(line, module) for line, module in found if module[:1] == ["fib_core"]]


def _edges() -> dict[tuple[str, str], list[str]]:
    """(importing node, imported node) -> the places that import so ("file:line")."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _node(_module_parts(path))
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, module in _imported(path, tree):
            target = _node(module)
            if target != source:
                where = f"{path.relative_to(ROOT)}:{line}"
                edges.setdefault((source, target), []).append(where)
    return edges


EDGES = _edges()


def _cycle(edges: dict[tuple[str, str], list[str]]) -> list[str] | None:
    """One cycle of the graph as a list of nodes (first == last), or None."""
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def test_the_graph_reads_the_kits_own_imports():
    """The parse sees the arrows the layering is about (a broken walk would pass everything)."""
    assert ("dataset", "tracing_rules") in EDGES  # definition folders' tracing.py
    assert ("bench", "checking") in EDGES
    assert ("fib_core", "apply") in EDGES
    assert ("cli", "cli_compat") in EDGES  # `from fib_core import cli_compat` is the module


def test_the_cycle_finder_finds_a_planted_cycle():
    planted = {("a", "b"): ["x:1"], ("b", "c"): ["x:2"], ("c", "a"): ["x:3"], ("c", "d"): []}
    assert _cycle(planted) == ["a", "b", "c", "a"]
    assert _cycle({("a", "b"): [], ("b", "c"): []}) is None


def test_every_node_has_a_place_in_the_layering():
    nodes = {n for edge in EDGES for n in edge}
    nodes |= {_node(_module_parts(p)) for p in PACKAGE.rglob("*.py")}
    unplaced = sorted(nodes - set(LAYERS))
    assert not unplaced, (
        f"fib_core nodes with no place in LAYERS (and docs/design.md): {unplaced}; add each "
        "where its imports allow"
    )


def test_the_package_graph_has_no_cycle():
    cycle = _cycle(EDGES)
    if cycle is not None:
        steps = [
            f"{a} -> {b} ({EDGES[(a, b)][0]})" for a, b in zip(cycle, cycle[1:], strict=False)
        ]
        pytest.fail("import cycle between fib_core packages: " + "; ".join(steps))


def test_no_package_imports_one_above_it():
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = [
        f"{source} -> {target} at {', '.join(places)}"
        for (source, target), places in sorted(EDGES.items())
        if source in rank and target in rank and rank[target] < rank[source]
    ]
    assert not upward, "imports of a package listed above (docs/design.md):\n" + "\n".join(
        upward
    )


# A module named in a string (``"fib_core.project.runflow:execute"`` handed to
# ``importlib.import_module``) is an import the graph above cannot see: the engine once called
# back into the launcher that way. Docstrings may name the callers a module serves; any other
# string naming a module of a package above is refused. The package's face is the exception:
# its lazy attributes name what ``fib_core.X`` loads on first use (see the module docstring).
_NAMED_MODULE = re.compile(r"\bfib_core\.(\w+)")


def _docstring_nodes(tree: ast.AST) -> set[int]:
    """``id`` of every docstring's constant node in ``tree``."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                    isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def upward_names(path: Path, source: str) -> list[str]:
    """``file:line: 'fib_core.X...'`` for each string of ``path`` (node ``source``), docstrings
    aside, that names a module of a package listed above ``source``."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docstrings = _docstring_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or \
                id(node) in docstrings:
            continue
        for match in _NAMED_MODULE.finditer(node.value):
            target = match.group(1)
            if target in rank and source in rank and rank[target] < rank[source]:
                found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    return found


def test_no_package_names_a_module_above_it_in_a_string():
    """The by-name import of a higher layer (the engine's GPU processes importing the
    launcher's shard function by name) cannot come back unseen."""
    named = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _node(_module_parts(path))
        if source != "fib_core":  # the face's lazy attributes, by design
            named += [f"{path.relative_to(ROOT)}: {n}" for n in upward_names(path, source)]
    assert not named, "strings naming a module of a package above:\n" + "\n".join(named)


def test_the_string_check_finds_a_planted_callback(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        '"""Run by fib_core.project.runflow (a docstring may say so)."""\n'
        'TARGET = "fib_core.project.runflow:execute"\n'
        'BELOW = "fib_core.data.trace"\n'
    )
    assert upward_names(planted, "bench") == [
        "planted.py:2: 'fib_core.project.runflow:execute'"
    ]
    assert upward_names(planted, "serve") == []  # serve sits above project
