"""The validation report: per definition, one result per check category, and its JSON form.

The JSON shape is the organizers' (``config`` + ``definitions`` -> ``{status, layout,
definition, workload, solution, trace, baseline, benchmark}``, each category ``null`` when it
was not run, else ``{status, messages: [{level, message}]}``), so a report written by either
tool renders with the other. A definition's status is the worst of its categories'.

Plain dataclasses rather than pydantic models: ``validate`` runs in every fork (``submit.py``
calls it), and the kit's core installs no pydantic.

>>> result = CheckResult.of([CheckMessage("warning", "a.json: description: empty; add one")])
>>> result.status
'warning'
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from fib_core.errors import FibError

Level = Literal["info", "warning", "error"]
Status = Literal["ok", "warning", "error"]

CATEGORIES = ("layout", "definition", "workload", "solution", "trace", "baseline", "benchmark")
# What runs without evaluating anything (``--disable-gpu``): every category but the benchmark.
CPU_CATEGORIES = CATEGORIES[:-1]
_RANK = {"ok": 0, "info": 0, "warning": 1, "error": 2}


@dataclass
class CheckMessage:
    """One finding: ``error`` and ``warning`` lines name the file, the field and what to do;
    ``info`` lines are counts ("14 valid")."""

    level: Level
    message: str


@dataclass
class CheckResult:
    status: Status
    messages: list[CheckMessage] = field(default_factory=list)

    @classmethod
    def of(cls, messages: list[CheckMessage]) -> CheckResult:
        """The result whose status is the worst level among ``messages``."""
        worst = max((_RANK[m.level] for m in messages), default=0)
        return cls(("ok", "warning", "error")[worst], list(messages))


@dataclass
class DefinitionReport:
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
        self.status = ("ok", "warning", "error")[worst]


@dataclass
class ReportConfig:
    dataset: str
    checks: list[str]
    disable_gpu: bool
    op_types: list[str] = field(default_factory=list)
    definitions: list[str] = field(default_factory=list)


@dataclass
class DatasetReport:
    config: ReportConfig
    definitions: dict[str, DefinitionReport] = field(default_factory=dict)

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: Any, source: str = "report") -> DatasetReport:
        """Read a report's JSON data; a malformed one is one :class:`FibError` line."""
        try:
            config = ReportConfig(**_object(data, "config", source))
            reports = {}
            for name, raw in _object(data, "definitions", source).items():
                raw = _as_dict(raw, f"definitions.{name}", source)
                report = DefinitionReport(status=raw.get("status", "ok"))
                for category in CATEGORIES:
                    value = raw.get(category)
                    if value is not None:
                        value = _as_dict(value, f"definitions.{name}.{category}", source)
                        setattr(report, category, CheckResult(
                            value["status"], [CheckMessage(**m) for m in value.get("messages", [])]))
                reports[name] = report
        except (TypeError, KeyError) as err:
            raise FibError(f"{source}: not a validation report ({err}); pass a report-*.json "
                           "written by `python -m fib_core validate`") from None
        return cls(config, reports)


def _object(data: Any, key: str, source: str) -> dict:
    return _as_dict(_as_dict(data, "", source).get(key), key, source)


def _as_dict(value: Any, where: str, source: str) -> dict:
    if not isinstance(value, dict):
        raise FibError(f"{source}: {where or 'top level'}: expected a JSON object, found "
                       f"{type(value).__name__}; pass a report-*.json written by "
                       "`python -m fib_core validate`")
    return value


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
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FibError(f"{p}: not readable JSON ({err}); pass a report-*.json written by "
                       "`python -m fib_core validate`") from None
    return DatasetReport.from_dict(data, str(p))
