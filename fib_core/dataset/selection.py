"""Choosing which workloads a run covers: ``--workloads`` filters and ``--quick``.

Filter grammar (one string per ``--workloads`` value; a workload is kept if ANY string
matches it):
- ``3f2a9c``: a uuid prefix;
- ``batch_size=64``, ``total_seq_len>=1000``: an axis condition (=, !=, <, <=, >, >=);
- ``batch_size=64,seq_len=1``: conditions joined by commas must ALL hold.

Example::

    select_workloads(workloads, ["batch_size>=32"])        # the big decode batches
    select_workloads(workloads, None, quick=True)          # the smoke subset
    select_workloads(workloads, None, quick=True, definition=name)  # untagged: by roofline size
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from fib_core.dataset.roofline import workload_size
from fib_core.errors import ConfigError

if TYPE_CHECKING:
    from fib_core.data import Trace

QUICK_TAG = "quick"
QUICK_FALLBACK_COUNT = 3

_OPS: dict[str, Callable[[int, int], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "!=": operator.ne,
    "=": operator.eq,
    "<": operator.lt,
    ">": operator.gt,
}
_COND = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|!=|=|<|>)\s*(-?\d+)\s*$")


def _matcher(text: str, axis_names: set[str]) -> Callable[[Trace], bool]:
    text = text.strip()
    if not any(op in text for op in _OPS):
        prefix = text.lower()
        return lambda t: t.workload.uuid.lower().startswith(prefix)
    conds = []
    for part in text.split(","):
        m = _COND.match(part)
        if not m:
            raise ConfigError(
                f"workload filter '{part.strip()}' is not 'axis<op>integer' "
                "(e.g. batch_size=64, total_seq_len>=1000) nor a uuid prefix"
            )
        axis, op, value = m.group(1), m.group(2), int(m.group(3))
        if axis not in axis_names:
            raise ConfigError(
                f"workload filter '{part.strip()}': no var axis '{axis}' "
                f"(var axes: {', '.join(sorted(axis_names)) or 'none'})"
            )
        conds.append((axis, _OPS[op], value))
    return lambda t: all(
        axis in t.workload.axes and fn(t.workload.axes[axis], v) for axis, fn, v in conds
    )


def select_workloads(
    workloads: Sequence[Trace],
    filters: Sequence[str] | None = None,
    *,
    quick: bool = False,
    definition: str | None = None,
) -> list[Trace]:
    """The workloads that pass ``filters`` (any of them), restricted to the quick subset.

    The quick subset is the workloads tagged ``quick``; a dataset without tags (the organizers')
    falls back to the :data:`QUICK_FALLBACK_COUNT` smallest by :func:`_size_key`: the roofline
    size under ``definition``'s cost model when it is named and has one, else the product of
    the axis values. An empty selection is an error that says why.
    """
    chosen = list(workloads)
    if filters:
        axis_names = {a for t in workloads for a in t.workload.axes}
        matchers = [_matcher(f, axis_names) for f in filters]
        chosen = [t for t in chosen if any(m(t) for m in matchers)]
        if not chosen:
            raise ConfigError(
                f"no workload matches --workloads {' '.join(filters)} "
                f"(of {len(workloads)} workloads)"
            )
    if quick:
        tagged = [t for t in chosen if QUICK_TAG in t.workload.tags]
        if tagged:
            chosen = tagged
        else:
            key = _size_key(definition, chosen)
            chosen = sorted(chosen, key=key)[:QUICK_FALLBACK_COUNT]
    return chosen


def _size_key(definition: str | None, workloads: Sequence[Trace]) -> Callable[[Trace], float]:
    """How the quick fallback orders ``workloads`` by size: the roofline size
    (:func:`~fib_core.dataset.roofline.workload_size`) when ``definition`` is named and its cost
    model sizes the first of them, else the product of the axis values, a fair proxy where
    there is no cost model."""

    def axes_product(t: Trace) -> float:
        return math.prod(t.workload.axes.values() or [1])

    if definition is None or not workloads:
        return axes_product

    def roofline(t: Trace) -> float:
        return workload_size(definition, t.workload.axes)

    try:
        roofline(workloads[0])
    except KeyError:  # no cost model for this definition
        return axes_product
    return roofline
