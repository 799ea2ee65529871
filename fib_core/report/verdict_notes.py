"""Why a PASSED workload can show a relative error of 30 or 660: the metric that decided it.

The element-wise rule fails an element only when it exceeds *both* ``atol`` and ``rtol``;
where the reference is near zero the relative error of a tiny absolute difference is huge, yet
the element passes on ``atol``. A row showing "rel err 6.6e+02" next to PASSED reads like a
bug in the kit unless the report says which figure made the verdict. The engine keeps the
figures in ``correctness.extra`` (tolerance, per-output matched ratio, checker); this module
turns them into one line.

Example::

    decided_by(correctness)  # -> "every element within atol=0.01 or rtol=0.01 (matched ..."
"""

from __future__ import annotations

from typing import Any

from fib_core.data.trace import EvaluationStatus

# A relative error above this many rtol on a PASSED row gets an explanation.
NOTABLE_REL_FACTOR = 10.0


def decided_by(correctness: Any, status: str = EvaluationStatus.PASSED) -> str:
    """One line naming the metric that passed ``correctness``, or "" when nothing looks odd."""
    if status != EvaluationStatus.PASSED or correctness is None:
        return ""
    extra = getattr(correctness, "extra", None) or {}
    rel = getattr(correctness, "max_relative_error", None)
    tol = extra.get("tolerance") or {}
    rtol = _num(tol.get("rtol"))
    atol = _num(tol.get("atol"))
    if rel is None or rtol is None or rel <= max(rtol * NOTABLE_REL_FACTOR, 1.0):
        return ""
    checker = extra.get("checker", "elementwise")
    if checker != "elementwise":
        return (
            f"judged by the {checker} checker (not by the element-wise errors shown); "
            "large relative errors come from near-zero reference elements"
        )
    outputs = extra.get("outputs") or {}
    ratios = [_num(o.get("matched_ratio")) for o in outputs.values() if isinstance(o, dict)]
    ratios = [r for r in ratios if r is not None]
    required = _num(tol.get("required_matched_ratio"))
    matched = f"matched ratio {min(ratios):.6g}" if ratios else "every element matched"
    if required is not None:
        matched += f" >= required {required:g}"
    if ratios and min(ratios) < 1.0:
        return (
            f"{matched}: the definition lets a share of elements exceed atol={_fmt(atol)} "
            f"and rtol={_fmt(rtol)}, and the largest relative errors are among those or on "
            "near-zero reference elements"
        )
    return (
        f"{matched}; an element fails only beyond both atol={_fmt(atol)} and "
        f"rtol={_fmt(rtol)}, so the large relative error sits on near-zero reference "
        "elements whose absolute error is within atol"
    )


def _num(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _fmt(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"
