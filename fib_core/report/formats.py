"""How the report writes its numbers, the same in the terminal and on the HTML page.

A latency keeps 3-4 significant digits in the unit that reads best (``7.21 us``, ``1.532 ms``,
``1.80 s``), a range names its unit once, a speedup ends in ``x`` and an error is in
scientific notation; an unknown figure is ``-``. Every table and headline of the report
imports these from here, below all of them.

Example::

    from fib_core.report.formats import fmt_ms, fmt_ms_range
    fmt_ms(0.00721), fmt_ms_range(0.00226, 0.00243)   # ('7.21 us', '2.26-2.43 us')
"""

from __future__ import annotations

import math


def fmt_ms(ms: float | None) -> str:
    """Latency with a unit that keeps 3-4 significant digits: 7.21 us, 104.3 us, 1.532 ms, 1.80 s."""
    if ms is None:
        return "-"
    if ms < 1.0:
        us = ms * 1e3
        return f"{us:.2f} us" if us < 100 else f"{us:.1f} us"
    if ms < 1000.0:
        return f"{ms:.3f} ms" if ms < 100 else f"{ms:.1f} ms"
    return f"{ms / 1e3:.2f} s"


def fmt_ms_range(low_ms: float | None, high_ms: float | None) -> str:
    """A latency range with its unit once when both ends share it: ``2.26-2.43 us``."""
    if low_ms is None or high_ms is None:
        return "-"
    lo, hi = fmt_ms(low_ms), fmt_ms(high_ms)
    lo_num, _, lo_unit = lo.partition(" ")
    hi_num, _, hi_unit = hi.partition(" ")
    return f"{lo_num}-{hi_num} {hi_unit}" if lo_unit == hi_unit else f"{lo} - {hi}"


def fmt_speedup(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def fmt_error(x: float | None) -> str:
    if x is None:
        return "-"
    if math.isnan(x):
        return "nan"
    return f"{x:.1e}"
