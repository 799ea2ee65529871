"""fib_core.report: results rows, contest summary, comparison with a previous run, rendering.

Nothing here imports torch or the engine: the report layer reads traces by attribute and its
own JSON results files, so it also works on a machine that only looks at results.
"""

from __future__ import annotations

from fib_core.report.compare import Delta, compare
from fib_core.report.render import progress_bar, render_results
from fib_core.report.results import (
    CPU_SMOKE_MODE,
    GPU_MODE,
    ResultsFileError,
    RunResults,
    merge,
    results_by_solution,
)
from fib_core.report.summary import Summary, summarize
from fib_core.report.workload_result import Achieved, Spread, WorkloadResult

__all__ = [
    "CPU_SMOKE_MODE",
    "GPU_MODE",
    "Achieved",
    "Delta",
    "ResultsFileError",
    "RunResults",
    "Spread",
    "Summary",
    "WorkloadResult",
    "compare",
    "merge",
    "progress_bar",
    "render_results",
    "results_by_solution",
    "summarize",
]
