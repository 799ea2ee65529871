"""TraceEntry: one recorded call, before deduplication and writing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TraceEntry:
    """A call of ``def_name``: its var-axis values, the tensors picked for dumping (CPU copies,
    or live references while a CUDA graph is being captured), its scalar inputs and its
    position in call order."""

    def_name: str
    axes: dict[str, int]
    definition_input_names: list[str]
    picked: dict[str, Any]
    order: int
    scalars: dict[str, int | float | bool] = field(default_factory=dict)
    pending: bool = False  # tensors still live on the device (read after graph replay)
