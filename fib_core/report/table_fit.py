"""Which columns of the results table fit the terminal: least important dropped first.

A table wider than the terminal makes rich squeeze every cell, which truncates exactly the
cells a contestant needs (status, uuid, error). Instead, whole columns are dropped, least
important first, until the rest fits; ``--wide`` keeps them all. The width of a column is
taken from its widest plain-text cell, so the choice needs no rendering.

Example::

    kept = fit_columns({"workload": ["aaaaaaaa"], "roofline": ["42% (1500.0 GB/s)"]}, width=20)
    # -> ["workload"]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text

# Dropped in this order when the table is too wide; columns not named here are never dropped.
DROP_ORDER = ("roofline", "abs err", "ref", "busy", "axes", "vs prev", "rel err")
# Per column: a space each side and one separator; plus the table's outer border.
COLUMN_OVERHEAD = 3
TABLE_OVERHEAD = 1


def plain_width(cell: str) -> int:
    """Printed width of a cell written in rich markup."""
    try:
        return Text.from_markup(cell).cell_len
    except Exception:  # not valid markup: count it as written
        return len(cell)


def column_width(header: str, cells: Sequence[str]) -> int:
    return max([plain_width(header), *(plain_width(c) for c in cells)])


def table_width(widths: Mapping[str, int]) -> int:
    return sum(w + COLUMN_OVERHEAD for w in widths.values()) + TABLE_OVERHEAD


def fit_columns(
    columns: Mapping[str, Sequence[str]],
    width: int,
    *,
    wide: bool = False,
    drop_order: Sequence[str] = DROP_ORDER,
) -> list[str]:
    """Names of the columns to show (in their order) so the table fits ``width`` characters;
    ``drop_order`` names the ones that may go, least important first."""
    widths = {name: column_width(name, cells) for name, cells in columns.items()}
    if wide:
        return list(widths)
    for name in drop_order:
        if table_width(widths) <= width:
            break
        widths.pop(name, None)
    return list(widths)


def dropped_note(all_names: Sequence[str], kept: Sequence[str], width: int) -> str | None:
    """One line naming the hidden columns, or None when nothing was hidden."""
    hidden = [n for n in all_names if n not in kept]
    if not hidden:
        return None
    return f"columns {', '.join(hidden)} hidden to fit {width} columns; --wide shows them"
