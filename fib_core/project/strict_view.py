"""The correctness view: each workload's error against its outputs' own scale.

The judge's rule (atol *or* rtol per element) hides errors in small outputs: GDN decode's are
about 0.02-0.05 against atol = 0.01, so an output off by 20 % passes. After the results table a
run prints, per workload, the relative L2 error of the whole output and the largest error over
the output's typical magnitude (its reference's RMS) and its overall scale error, warns in one line when the definition's
atol is a sizeable share of that magnitude, and with ``--strict`` fails the workloads that the
strict check (:func:`fib_core.bench.evaluation.compare.strict_problems`) rejects. The judge's verdicts, the
ledger and the score are not changed.

Example::

    from rich.console import Console
    failing = print_correctness_view(traces, Console(), strict=True)
    exit_code = 1 if failing else 0
"""

from __future__ import annotations

from typing import Any

from fib_core.bench.evaluation.compare import LOOSE_ATOL_SHARE, loose_tolerance, strict_problems


def _extra(trace: Any) -> dict[str, Any] | None:
    ev = getattr(trace, "evaluation", None)
    corr = getattr(ev, "correctness", None) if ev is not None else None
    extra = getattr(corr, "extra", None) if corr is not None else None
    return extra if isinstance(extra, dict) else None


def _worst_output(extra: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The output with the largest relative L2 error, with its figures."""
    outputs = [(n, o) for n, o in (extra.get("outputs") or {}).items()
               if isinstance(o, dict) and "rel_l2" in o]
    return max(outputs, key=lambda item: item[1]["rel_l2"]) if outputs else None


def correctness_rows(traces: list[Any]) -> list[tuple[str, ...]]:
    """(workload, output, rel L2, scale error, max err / typical, typical |out|) per compared
    workload, for its output with the largest relative L2 error."""
    rows = []
    for t in traces:
        extra = _extra(t)
        worst = _worst_output(extra) if extra else None
        if worst is None:
            continue
        name, o = worst
        scale = float(o.get("scale") or 0.0)
        over = float(o.get("max_abs") or 0.0) / scale if scale > 0 else float("inf")
        rows.append((t.workload.uuid[:8], name, f"{o['rel_l2']:.1e}",
                     f"{float(o.get('bias') or 0.0):+.2%}",
                     f"{over:.1e}" if over != float("inf") else "-", f"{scale:.2g}"))
    return rows


def print_correctness_view(traces: list[Any], console: Any, *, strict: bool = False) -> list[str]:
    """Print the view (nothing when no workload has the figures); with ``strict``, the
    workloads the strict check fails. Returns the uuids of those (always [] without strict)."""
    # Imported here: rich takes ~55 ms to load, and importing this module does not need it.
    from rich import box
    from rich.table import Table

    rows = correctness_rows(traces)
    if not rows:
        return []
    table = Table(title="error against each output's own scale (worst output per workload)",
                  box=box.ASCII if not console.is_terminal else box.SIMPLE_HEAD, highlight=False)
    for name in ("workload", "output", "rel L2", "scale err", "max err / typical",
                 "typical |out|"):
        table.add_column(name, justify="left" if name in ("workload", "output") else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    loose = [x for x in (loose_tolerance(_extra(t)) for t in traces) if x is not None]
    if loose:
        name, atol, scale, share = max(loose, key=lambda x: x[3])
        console.print(
            f"warning: atol={atol:g} is {share:.0%} of output {name!r}'s typical magnitude "
            f"({scale:.2g}, at least {LOOSE_ATOL_SHARE:.0%} counts as loose): errors that size "
            "pass the judge; run_local.py --strict fails them",
            highlight=False, soft_wrap=True,
        )
    if not strict:
        return []
    failing = []
    for t in traces:
        problems = strict_problems(_extra(t))
        if problems and t.evaluation is not None and t.evaluation.status == "PASSED":
            failing.append(t.workload.uuid)
            console.print(f"strict: {t.workload.uuid[:8]} fails: {'; '.join(problems)}",
                          highlight=False, soft_wrap=True)
    judged = sum(1 for t in traces if _extra(t) is not None)
    verdict = (f"strict check: {len(failing)} of {judged} workloads fail (the judge's verdicts "
               "above are unchanged)" if failing else
               f"strict check: passed ({judged} workloads)")
    console.print(verdict, highlight=False)
    return failing
