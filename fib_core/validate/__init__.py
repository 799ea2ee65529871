"""``python -m fib_core validate``: check a FlashInfer-Trace dataset before anything runs on it.

Seven categories, as in the organizers' tool (docs/validate.md says what each checks):
layout, definition, workload, solution, trace, baseline and benchmark (the last evaluates the
reference and the baseline solutions; ``disable_gpu`` leaves it out). Every finding is one
line naming the file, the field, and what to do.

Example::

    from fib_core.validate import validate_dataset, render_report
    report = validate_dataset("my-dataset", disable_gpu=True, outputs=["json"])
    for line in report.findings("error"):
        print(line)
    print(render_report("my-dataset/reports/report-20260413-120000.json"))
"""

from __future__ import annotations

from fib_core.validate.render import render_report, render_text
from fib_core.validate.report import CATEGORIES, CPU_CATEGORIES, DatasetReport, load_report
from fib_core.validate.run import validate_dataset

__all__ = [
    "CATEGORIES",
    "CPU_CATEGORIES",
    "DatasetReport",
    "load_report",
    "render_report",
    "render_text",
    "validate_dataset",
]
