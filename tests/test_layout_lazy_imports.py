"""An import inside a function says why it is there.

Imports sit at the top of a module, where they show who depends on whom. One goes inside a
function only where start-up time needs it (torch, pydantic, a package the CLI does not load
until a command runs) or where a cycle would otherwise form; a comment on its line or within the
two lines above says which. A run of consecutive import lines is one group: the comment above
its first line speaks for all of them. Imports under ``if TYPE_CHECKING:`` are not counted: they
never run. Only real comments count (a ``#`` inside a docstring does not).
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fib_core"

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _is_type_checking(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _function_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import that runs inside a function body (nested functions included)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            if inside and isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            walk(child, inside or isinstance(child, _FUNCTIONS))

    walk(tree, False)
    return found


def _comment_lines(text: str) -> set[int]:
    """Line numbers (1-based) that hold a comment token."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return {tok.start[0] for tok in tokens if tok.type == tokenize.COMMENT}


def _is_import_line(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(("import ", "from ")) and " import " in f" {stripped}"


def _has_reason(lines: list[str], comments: set[int], lineno: int) -> bool:
    """A comment on the import's line, or on one of the two lines above the first line of its
    group of consecutive imports (blank lines inside a group allowed)."""
    if lineno in comments:
        return True
    first = lineno
    above = first - 1
    while above >= 1 and (_is_import_line(lines[above - 1]) or not lines[above - 1].strip()):
        if above in comments:
            return True
        if _is_import_line(lines[above - 1]):
            first = above
        above -= 1
    return any(n in comments for n in range(max(1, first - 2), first + 1))


def unexplained_imports(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line`` of each import inside a function of ``path`` that gives no reason."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    comments = _comment_lines(text)
    where = path.relative_to(root).as_posix()
    return [
        f"{where}:{node.lineno}: {lines[node.lineno - 1].strip()}"
        for node in _function_imports(ast.parse(text, filename=str(path)))
        if not _has_reason(lines, comments, node.lineno)
    ]


def test_every_import_inside_a_function_says_why():
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        missing += unexplained_imports(path)
    assert not missing, (
        "imports inside functions with no comment saying why (move each to the module top, "
        "or say on the line above what start-up cost or cycle keeps it here):\n"
        + "\n".join(missing)
    )


def test_the_check_flags_a_planted_import_and_passes_explained_ones(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from typing import TYPE_CHECKING\n"
        "import json\n"  # line 2: module level, fine
        "if TYPE_CHECKING:\n"
        "    import torch\n"  # line 4: never runs, fine
        "def light():\n"
        "    # Imported here: takes seconds to load.\n"
        "    import torch\n"  # line 7: the reason is on the line above
        "    import numpy\n"  # line 8: two lines below the reason, fine
        "    import math  # here: a cycle\n"  # line 9: the reason on its own line
        "    import csv\n"  # line 10: in the group the comment on line 6 opens
        "    return torch, numpy, math, csv\n"
        "def bare():\n"
        "    \"\"\"A docstring with a # in it is no reason.\"\"\"\n"
        "    from os import path\n"  # line 13: no reason
        "    def inner():\n"
        "        import re\n"  # line 15: nested function, no reason
        "        return re\n"
        "    return path, inner\n"
        "class Holder:\n"
        "    def method(self):\n"
        "        if self:\n"
        "            import csv\n"  # line 21: under a branch of a method, no reason
        "        return csv\n",
        encoding="utf-8",
    )
    assert unexplained_imports(planted, tmp_path) == [
        "planted.py:14: from os import path",
        "planted.py:16: import re",
        "planted.py:22: import csv",
    ]
