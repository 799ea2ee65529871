"""How the report's charts scale their axes: log where values span a decade, plain numbers.

One rule for every chart (:mod:`.plots`): an axis whose positive values reach a factor of ten
from lowest to highest is drawn on a log scale with ticks written as plain numbers (``20``,
``0.5``, not ``2x10^1``); a linear x axis whose values are all whole numbers (pages, batch
sizes) gets whole-number ticks, never ``1.25``.

matplotlib is imported inside the functions: it is optional (tables render without it) and
takes about 0.9 s to load, and these run only once a figure exists.

Example::

    scale_y(ax, [0.002, 0.5])        # log y, ticks 0.002, 0.005, 0.01, ...
    scale_x(ax, "max_num_pages", [1, 2, 3])   # linear x, ticks 1, 2, 3
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

DECADE = 10.0  # values whose highest / lowest reaches this get a log axis
FONT = 9


def spans_a_decade(values: Sequence[float]) -> bool:
    """True when every value is positive and the highest is ten times the lowest or more.

    >>> spans_a_decade([1, 9.9]), spans_a_decade([0.5, 5]), spans_a_decade([0, 100])
    (False, True, False)
    """
    return bool(values) and min(values) > 0 and max(values) / min(values) >= DECADE


def scale_y(ax: Any, values: Sequence[float]) -> None:
    """Log y with plain-number ticks when the positive ``values`` span a decade."""
    positive = [v for v in values if v and v > 0]
    if spans_a_decade(positive):
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis, positive)


def scale_x(ax: Any, axis: str, xs: Sequence[float]) -> None:
    """The axis name as x label; log scale (plain numbers as ticks) when x spans a decade,
    whole-number ticks when every x is a whole number, one lone shape centred."""
    # Imported here: matplotlib is optional (see the module's docstring).
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel(axis or "workload", fontsize=FONT)
    if spans_a_decade(xs):
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis, xs)
    elif xs and all(float(x).is_integer() for x in xs):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if len(set(xs)) == 1:  # one shape: a point in the middle, not at an edge
        ax.set_xlim(xs[0] * 0.5 if xs[0] > 0 else -1, xs[0] * 1.5 if xs[0] > 0 else 1)


def plain_log_ticks(axis: Any, values: Sequence[float]) -> None:
    """Log-axis ticks as plain numbers: 1-2-5 steps over two decades or less, one per decade
    beyond; the unlabelled minor ticks stay as marks."""
    # Imported here: matplotlib is optional (see the module's docstring).
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    decades = math.log10(max(values) / min(values))
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if decades <= 2.2 else (1.0,)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())
