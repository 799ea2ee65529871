"""The text form of a validation report (what ``validate`` prints and ``validate-render`` shows).

Same layout as the organizers' renderer: a header with the run's settings, the count of
definitions per status, then one block per definition, one line per category and one indented
line per message.

>>> from fib_core.validate.report import DatasetReport, ReportConfig
>>> config = ReportConfig(dataset="ds", checks=["layout"], disable_gpu=True)
>>> print(render_text(DatasetReport(config=config)).splitlines()[0])
=== Dataset Validation Report ===
"""

from __future__ import annotations

from pathlib import Path

from fib_core.validate.report import DatasetReport, load_report


def render_text(report: DatasetReport) -> str:
    """The report as text lines (no trailing newline)."""
    cfg = report.config
    lines = [
        "=== Dataset Validation Report ===",
        f"dataset:       {cfg.dataset}",
        f"checks:        {', '.join(cfg.checks)}",
        f"disable_gpu:   {str(cfg.disable_gpu).lower()}",
        f"op_types:      {', '.join(cfg.op_types) or '(all)'}",
        f"definitions:   {', '.join(cfg.definitions) or '(all)'}",
        "",
    ]
    counts = report.counts()
    lines += [f"{sum(counts.values())} definitions: {counts['ok']} ok, {counts['warning']} "
              f"warning, {counts['error']} error", ""]
    for name, entry in sorted(report.definitions.items()):
        lines.append(f"--- {name} [{entry.status.upper()}] ---")
        for category, result in entry.results():
            label = f"{category}:".ljust(12)
            if result is None:
                lines.append(f"  {label} None (skipped)")
                continue
            lines.append(f"  {label} {result.status}")
            lines += [f"    - {m.message}" for m in result.messages]
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def render_report(report_json: str | Path, output: str | Path | None = None) -> str:
    """Render a report file; write it to ``output`` when given (else only return it).

    Example: ``print(render_report("dataset/reports/report-20260413-120000.json"))``."""
    text = render_text(load_report(report_json))
    if output is not None:
        Path(output).write_text(text + "\n", encoding="utf-8")
    return text
