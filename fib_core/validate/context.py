"""What belongs to one definition in a scanned dataset: its files' records, each given to one
definition only (the one it names, else the one its path names), so that a fault is reported
once, under the definition it breaks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fib_core.validate.scan import DatasetIndex, Record


@dataclass
class DefinitionContext:
    name: str
    root: Path
    definition: Any  # Definition | None when its file did not parse
    definition_records: list[Record] = field(default_factory=list)
    workloads: list[Record] = field(default_factory=list)
    solutions: list[Record] = field(default_factory=list)
    traces: list[Record] = field(default_factory=list)
    all_solution_names: set[str] = field(default_factory=set)

    @property
    def op_type(self) -> str | None:
        return self.definition.op_type if self.definition is not None else None

    def workload_uuids(self) -> set[str]:
        return {r.value.workload.uuid for r in self.workloads
                if r.value is not None and r.value.is_workload_trace()}


def contexts(index: DatasetIndex) -> dict[str, DefinitionContext]:
    """One context per definition name found under ``definitions/``."""
    names = index.definition_names()
    out = {}
    for name, recs in names.items():
        parsed = [r.value for r in recs if r.value is not None]
        out[name] = DefinitionContext(name, index.root, parsed[0] if parsed else None,
                                      definition_records=recs)
    solution_names = {r.value.name for r in index.solutions if r.value is not None}
    for ctx in out.values():
        ctx.all_solution_names = solution_names
    for rec in index.workloads:
        _give(out, rec, Path(rec.file).stem, "workloads")
    for rec in index.solutions:
        parts = rec.file.split("/")
        _give(out, rec, parts[-2] if len(parts) >= 3 else "", "solutions")
    for rec in index.traces:
        _give(out, rec, Path(rec.file).stem, "traces")
    return out


def _give(out: dict[str, DefinitionContext], rec: Record, by_path: str, bucket: str) -> None:
    named = getattr(rec.value, "definition", None) if rec.value is not None else None
    owner = named if named in out else by_path if by_path in out else None
    if owner is not None:
        getattr(out[owner], bucket).append(rec)
