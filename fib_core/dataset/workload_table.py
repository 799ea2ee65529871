"""The var-axis values of the embedded workloads, by definition name.

Each definition folder's ``workloads.py`` holds its own table (see
:mod:`fib_core.dataset.registry`); this module keeps the old names: :func:`workload_rows` and
``REAL_WORKLOADS[definition] = (column names, rows)``.
"""

from __future__ import annotations

from typing import Any

from fib_core.dataset import registry


def workload_rows(definition_name: str) -> list[dict[str, int]]:
    """The real workloads of one definition as dicts keyed by column name, in dataset order."""
    entry = registry.get(definition_name)
    if entry is None:
        raise KeyError(definition_name)
    return entry.workload_rows()


def __getattr__(name: str) -> Any:
    if name == "REAL_WORKLOADS":
        table = {}
        for entry in registry.entries():
            rows = entry.workload_rows()
            if rows:
                columns = tuple(rows[0])
                table[entry.name] = (columns, [tuple(r.values()) for r in rows])
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
