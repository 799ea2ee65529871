"""Read a dataset folder file by file, keeping what each file holds or why it does not parse.

Unlike :meth:`fib_core.data.TraceSet.from_path`, which stops at the first bad record, the scan
goes on past every problem so that ``validate`` can report all of them, each as one line that
names the file (relative to the dataset root), the line for JSONL files, and the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fib_core.data import Definition, Solution, Trace
from fib_core.data.json_io import parse_json
from fib_core.errors import FibError, SchemaError


@dataclass
class Record:
    """One parsed JSON document (a whole file, or one JSONL line), or the reason it failed."""

    file: str  # relative to the dataset root, with "/" separators
    line: int | None
    value: Any = None
    error: str | None = None

    @property
    def where(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"


@dataclass
class DatasetIndex:
    root: Path
    definitions: list[Record] = field(default_factory=list)
    workloads: list[Record] = field(default_factory=list)  # one per JSONL line
    solutions: list[Record] = field(default_factory=list)
    traces: list[Record] = field(default_factory=list)  # one per JSONL line

    def definition_names(self) -> dict[str, list[Record]]:
        """Definition name -> its records (a name declared twice has two); a file that does
        not parse counts under its file name."""
        out: dict[str, list[Record]] = {}
        for rec in self.definitions:
            name = rec.value.name if rec.value is not None else Path(rec.file).stem
            out.setdefault(name, []).append(rec)
        return out

    def op_type_of(self, name: str) -> str | None:
        recs = [r for r in self.definitions if r.value is not None and r.value.name == name]
        return recs[0].value.op_type if recs else None


def scan(root: Path) -> DatasetIndex:
    """Every definition, workload, solution and trace record under ``root``."""
    index = DatasetIndex(root=root)
    index.definitions = [_one(root, p, Definition) for p in _files(root, "definitions", "*.json")]
    index.solutions = [_one(root, p, Solution) for p in _files(root, "solutions", "*.json")]
    for p in _files(root, "workloads", "*.jsonl"):
        index.workloads += _lines(root, p)
    for p in _files(root, "traces", "*.jsonl"):
        index.traces += _lines(root, p)
    return index


def relative(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _files(root: Path, folder: str, pattern: str) -> list[Path]:
    base = root / folder
    return sorted(p for p in base.rglob(pattern) if p.is_file()) if base.is_dir() else []


def _one(root: Path, path: Path, cls: Any) -> Record:
    rel = relative(root, path)
    try:
        data = parse_json(path.read_text(encoding="utf-8"), Path(rel))
    except (OSError, UnicodeDecodeError) as err:
        return Record(rel, None, error=f"{rel}: not readable ({_short(err)}); fix the file")
    except SchemaError as err:
        return Record(rel, None, error=str(err))
    return _parse(rel, None, data, cls)


def _lines(root: Path, path: Path) -> list[Record]:
    rel = relative(root, path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        return [Record(rel, None, error=f"{rel}: not readable ({_short(err)}); fix the file")]
    out = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            data = parse_json(line, Path(rel), lineno)
        except SchemaError as err:
            out.append(Record(rel, lineno, error=str(err)))
            continue
        out.append(_parse(rel, lineno, data, Trace))
    return out


def _parse(rel: str, line: int | None, data: Any, cls: Any) -> Record:
    try:
        return Record(rel, line, value=cls.from_dict(data))
    except SchemaError as err:
        return Record(rel, line, error=str(err.located(rel, line)))
    except FibError as err:
        return Record(rel, line, error=f"{rel}{'' if line is None else f':{line}'}: {err}")


def _short(err: Exception) -> str:
    return str(err).splitlines()[0][:200]
