"""``report merge``: join several dataset folders (or run outputs) into one folder.

Typical use: traces measured on several machines (or Modal shards), each written under its own
dataset copy, gathered into one folder that ``report summary`` / ``report best`` can read.

Rules, in the order the sources are given (an existing output folder counts as the first):
- JSON files (definitions, solutions) and blobs are copied when absent; an identical file is
  skipped; a *different* file under the same path is a conflict and stops the merge before
  anything is written, because silently keeping one would mix two datasets.
- JSONL files (workloads, traces) are unions of their records: a record already present
  anywhere under the same top folder (even in a file of the other trace layout) is dropped.
  Records keep their order; interrupted (truncated) records are skipped.
"""

from __future__ import annotations

import filecmp
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from fib_core.data.containment import link_escape
from fib_core.data.json_io import dump_jsonl, iter_jsonl
from fib_core.errors import FibError

DATASET_FOLDERS = ("definitions", "solutions", "workloads", "traces", "blob")


@dataclass(frozen=True)
class MergeStats:
    """What a merge did: files copied, JSONL records added and duplicates dropped."""

    files_copied: int
    records_added: int
    duplicates_dropped: int


def merge_datasets(sources: list[Path], output: Path) -> MergeStats:
    """Merge ``sources`` into ``output`` (created if needed); see the module rules."""
    if not sources:
        raise FibError("report merge: no source folder; pass --local PATH at least once")
    output = Path(output)
    if output.exists() and not output.is_dir():
        raise FibError(f"report merge: --output {output} is a file; pass a folder")
    roots = [_source_root(Path(p)) for p in sources]
    copies, jsonl = _plan(roots, output)
    for src, dst in copies:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    added, dropped = _merge_jsonl(jsonl, output)
    return MergeStats(files_copied=len(copies), records_added=added, duplicates_dropped=dropped)


def _source_root(path: Path) -> Path:
    if not path.is_dir():
        raise FibError(f"report merge: --local {path} is not a folder; pass a dataset folder")
    if not any((path / sub).is_dir() for sub in DATASET_FOLDERS):
        raise FibError(
            f"report merge: --local {path} has none of {', '.join(DATASET_FOLDERS)}; "
            "pass a dataset folder (the one holding definitions/ and traces/)"
        )
    return path


def _dataset_files(root: Path) -> list[Path]:
    """The dataset's files; a symbolic link that leads outside ``root`` is refused, so a merge
    never copies (or publishes) a file from elsewhere on the machine."""
    files: list[Path] = []
    for sub in DATASET_FOLDERS:
        base = root / sub
        if base.is_dir():
            files += sorted(
                p for p in base.rglob("*") if p.is_file() and not p.name.startswith(".")
            )
    for f in files:
        target = link_escape(f, root)
        if target is not None:
            raise FibError(
                f"report merge: {f} is a symbolic link to {target}, outside {root}; copy the "
                "file into the dataset or remove the link"
            )
    return files


def _plan(roots: list[Path], output: Path) -> tuple[list[tuple[Path, Path]], dict[str, list[Path]]]:
    """Decide every copy and collect JSONL sources per relative path; raise on any conflict."""
    chosen: dict[Path, Path] = {}  # relative path -> file whose content the output will hold
    if output.is_dir():
        for f in _dataset_files(output):
            chosen[f.relative_to(output)] = f
    copies: list[tuple[Path, Path]] = []
    jsonl: dict[str, list[Path]] = {}
    for root in roots:
        for f in _dataset_files(root):
            rel = f.relative_to(root)
            if f.suffix == ".jsonl":
                jsonl.setdefault(rel.as_posix(), []).append(f)
                continue
            held = chosen.get(rel)
            if held is None:
                chosen[rel] = f
                copies.append((f, output / rel))
            elif held.resolve() != f.resolve() and not filecmp.cmp(held, f, shallow=False):
                raise FibError(
                    f"report merge: {f} differs from {held} (same path {rel.as_posix()}); "
                    "the sources hold different versions: merge them separately or rename one"
                )
    return copies, jsonl


def _merge_jsonl(sources: dict[str, list[Path]], output: Path) -> tuple[int, int]:
    seen: dict[str, set[str]] = {}  # top folder -> canonical records already in the output
    existing: dict[str, list[object]] = {}
    if output.is_dir():
        for f in _dataset_files(output):
            if f.suffix == ".jsonl":
                rel = f.relative_to(output).as_posix()
                records = [raw for _, raw in iter_jsonl(f)]
                existing[rel] = records
                keys = seen.setdefault(rel.split("/", 1)[0], set())
                keys.update(_canonical(r) for r in records)
    added = dropped = 0
    for rel, files in sources.items():
        keys = seen.setdefault(rel.split("/", 1)[0], set())
        records = list(existing.get(rel, []))
        before = len(records)
        for f in files:
            for _, raw in iter_jsonl(f):
                key = _canonical(raw)
                if key in keys:
                    dropped += 1
                    continue
                keys.add(key)
                records.append(raw)
        if len(records) > before or rel not in existing:
            dump_jsonl(records, output / rel)
        added += len(records) - before
    return added, dropped


def _canonical(record: object) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"))
