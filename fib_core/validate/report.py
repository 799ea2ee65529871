"""The validation report: per definition, one result per check category, and its JSON form.

The JSON shape is the organizers' (``config`` + ``definitions`` -> ``{status, layout,
definition, workload, solution, trace, baseline, benchmark}``, each category ``null`` when it
was not run, else ``{status, messages: [{level, message}]}``), so a report written by either
tool renders with the other. A definition's status is the worst of its categories'.

>>> message = CheckMessage(level="warning", message="a.json: description: empty; add one")
>>> CheckResult.of([message]).status
'warning'
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from fib_core.errors import FibError

Level = Literal["info", "warning", "error"]
Status = Literal["ok", "warning", "error"]

CATEGORIES = ("layout", "definition", "workload", "solution", "trace", "baseline", "benchmark")
# What runs without evaluating anything (``--disable-gpu``): every category but the benchmark.
CPU_CATEGORIES = CATEGORIES[:-1]
_RANK = {"ok": 0, "info": 0, "warning": 1, "error": 2}
_STATUS: tuple[Status, Status, Status] = ("ok", "warning", "error")


class CheckMessage(BaseModel):
    """One finding: ``error`` and ``warning`` lines name the file, the field and what to do;
    ``info`` lines are counts ("14 valid")."""

    level: Level
    message: str


class CheckResult(BaseModel):
    status: Status
    messages: list[CheckMessage] = []

    @classmethod
    def of(cls, messages: list[CheckMessage]) -> CheckResult:
        """The result whose status is the worst level among ``messages``."""
        worst = max((_RANK[m.level] for m in messages), default=0)
        return cls(status=_STATUS[worst], messages=list(messages))


class DefinitionReport(BaseModel):
    status: Status = "ok"
    layout: CheckResult | None = None
    definition: CheckResult | None = None
    workload: CheckResult | None = None
    solution: CheckResult | None = None
    trace: CheckResult | None = None
    baseline: CheckResult | None = None
    benchmark: CheckResult | None = None

    def results(self) -> list[tuple[str, CheckResult | None]]:
        return [(name, getattr(self, name)) for name in CATEGORIES]

    def settle(self) -> None:
        """Set ``status`` to the worst status of the categories that ran."""
        worst = max((_RANK[r.status] for _, r in self.results() if r is not None), default=0)
        self.status = _STATUS[worst]


class ReportConfig(BaseModel):
    dataset: str
    checks: list[str]
    disable_gpu: bool
    op_types: list[str] = []
    definitions: list[str] = []


class DatasetReport(BaseModel):
    config: ReportConfig
    definitions: dict[str, DefinitionReport] = {}

    def counts(self) -> dict[str, int]:
        """How many definitions are ok / warning / error."""
        out = {"ok": 0, "warning": 0, "error": 0}
        for report in self.definitions.values():
            out[report.status] += 1
        return out

    def findings(self, level: Level = "error") -> list[str]:
        """Every message of ``level`` (``"error"``: what blocks a submission), in report order."""
        return [m.message for report in self.definitions.values()
                for _, result in report.results() if result is not None
                for m in result.messages if m.level == level]

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)


def load_report(path: str | Path) -> DatasetReport:
    """A report JSON file read back (for ``validate-render``); one FibError line if unreadable.

    >>> load_report("missing.json")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    fib_core.errors.FibError: missing.json: no such report file; ...
    """
    p = Path(path)
    if not p.is_file():
        raise FibError(f"{p}: no such report file; pass the report-*.json that "
                       "`python -m fib_core validate` wrote")
    try:
        return DatasetReport.model_validate_json(p.read_bytes())
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        raise FibError(f"{p}: {where}: {first['msg']}; pass a report-*.json written by "
                       "`python -m fib_core validate`") from None
