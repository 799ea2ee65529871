"""Parser of ``organizers_api.md``: the organizers' API as (module, entry) records."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

LISTING = Path(__file__).with_name("organizers_api.md")

_ENTRY = re.compile(r"^((?:@[\w.]+(?:\([^)]*\))?\s+)*)(class|def)\s+([\w.]+)(.*)$")


@dataclass(frozen=True)
class Entry:
    """One line of the listing: a class, a function, a method, or an ``exports:`` name."""

    module: str
    kind: str  # "class" | "def" | "export"
    name: str  # "Name" or "Class.method"
    decorators: tuple[str, ...] = ()
    params: str = ""  # "(a: int, b=1)" for defs; "(Base)" or "" for classes
    line: str = ""
    note: str = ""  # the text after "  # " on the line; "gap: ..." marks a known difference

    @property
    def gap(self) -> str | None:
        return self.note.removeprefix("gap:").strip() if self.note.startswith("gap:") else None

    @property
    def id(self) -> str:
        return f"{self.module}:{self.name}" + (
            f"@{self.params}" if "overload" in self.decorators else ""
        )


def _split_params(rest: str) -> str:
    """The parenthesised part at the start of ``rest`` (brackets inside are balanced)."""
    rest = rest.strip()
    if not rest.startswith("("):
        return ""
    depth = 0
    for i, ch in enumerate(rest):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0:
            return rest[: i + 1]
    raise ValueError(f"unbalanced parentheses in {rest!r}")


def parse_listing(text: str | None = None) -> list[Entry]:
    text = LISTING.read_text() if text is None else text
    entries: list[Entry] = []
    module = None
    for raw in text.splitlines():
        line, _, note = raw.partition("  # ")
        line, note = line.strip(), note.strip()
        if line.startswith("## "):
            module = line[3:].strip()
            continue
        if module is None or not line:
            continue
        if line.startswith("exports:"):
            for name in line.removeprefix("exports:").split(","):
                entries.append(Entry(module, "export", name.strip(), line=line, note=note))
            continue
        match = _ENTRY.match(line)
        if match is None:
            continue
        decos, kind, name, rest = match.groups()
        decorators = tuple(d.lstrip("@").split("(")[0] for d in decos.split())
        entries.append(Entry(module, kind, name, decorators, _split_params(rest), line, note))
    return entries


def parameters(entry: Entry) -> ast.arguments:
    """The listed parameters as an ``ast.arguments`` (annotations are not evaluated)."""
    tree = ast.parse(f"def f{entry.params}: pass")
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    return fn.args
