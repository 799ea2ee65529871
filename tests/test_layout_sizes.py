"""Sizes in fib_core: no module over 450 lines, no function or method over 60.

A module is measured in physical lines; a function from its ``def`` line to its last line
(decorators not counted, nested functions and methods measured on their own as well as inside
the function that holds them). Every ``.py`` under fib_core counts, the definition folders
included. A file or function over the limit is split by its jobs (a phase into a named helper,
a cohesive group of functions into a sibling module), not squeezed.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fib_core"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60


def oversized(source: str, name: str) -> list[str]:
    """One line per part of ``source`` (the module called ``name``) over its limit: the
    module with its line count, each function with its qualified name and length."""
    found = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{name}: module has {lines} lines (limit {MAX_MODULE_LINES})")

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualified = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    length = child.end_lineno - child.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        found.append(f"{name}:{child.lineno} {qualified} has {length} lines "
                                     f"(limit {MAX_FUNCTION_LINES})")
                visit(child, qualified + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source, filename=name), "")
    return found


def test_no_module_or_function_in_fib_core_is_over_its_limit() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 100  # the walk found the package, not an empty folder
    found = []
    for path in files:
        found += oversized(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not found, "split these by their jobs:\n" + "\n".join(found)


def test_the_measure_flags_what_is_over_and_only_that() -> None:
    """The walk above finds a long method inside a class, a long function nested in another,
    and a long module; a function of exactly the limit, and its decorator lines, pass."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 2))
    at_limit = f"@staticmethod\n@staticmethod\ndef fits():\n    '''doc'''\n{body}\n"
    over = f"class Holder:\n    def method(self):\n        pass\n{body.replace('    ', '        ')}\n" \
           "        return 1\n"
    nested = "def outer():\n    def inner():\n        pass\n" \
             f"{body.replace('    ', '        ')}\n        return 1\n    return inner\n"
    assert oversized(at_limit, "a.py") == []
    assert [line.split(" has ")[0] for line in oversized(over, "b.py")] == ["b.py:2 Holder.method"]
    assert [line.split(" has ")[0] for line in oversized(nested, "c.py")] == [
        "c.py:1 outer", "c.py:2 outer.inner"]
    long_module = "\n".join(f"x{i} = {i}" for i in range(MAX_MODULE_LINES + 1)) + "\n"
    assert oversized(long_module, "d.py") == [f"d.py: module has {MAX_MODULE_LINES + 1} lines "
                                              f"(limit {MAX_MODULE_LINES})"]
    assert oversized(long_module.split("\n", 1)[1], "e.py") == []
