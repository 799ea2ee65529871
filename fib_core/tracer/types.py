"""TraceEntry (one recorded call) and TracingRule (what to keep of a definition's calls).

A :class:`TracingRule` pairs a *dump choice* (the inputs saved as safetensors blobs: what
random numbers cannot stand in for, such as page tables and sequence boundaries) with a
*dedup policy* (from all entries of one group, the representatives to keep) and optional
*dedup keys* (how entries are grouped before the policy runs). Policies are plain functions
``list[TraceEntry] -> list[TraceEntry]``; a dump choice is a list of input names or a function
of the bound arguments returning one. Ready-made ones are in :mod:`fib_core.tracer.presets`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
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


Policy = Callable[[list[TraceEntry]], list[TraceEntry]]
DumpChoice = Sequence[str] | Callable[[Mapping[str, Any]], Sequence[str]]
DedupKeys = Callable[[TraceEntry], Hashable]


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


@dataclass
class TracingRule:
    """What to keep of one definition's calls.

    >>> from fib_core.tracer.presets import DEDUP_BY_AVG_SEQ_LEN
    >>> TracingRule(tensors_to_dump=["cu_seqlens"], dedup_policy=DEDUP_BY_AVG_SEQ_LEN)
    ... # doctest: +ELLIPSIS
    TracingRule(...)
    """

    tensors_to_dump: DumpChoice
    dedup_policy: Policy
    dedup_keys: DedupKeys | None = None

    def __post_init__(self) -> None:
        if isinstance(self.tensors_to_dump, str):
            raise TypeError(
                f"TracingRule.tensors_to_dump: found the string {self.tensors_to_dump!r}, "
                "expected a list of input names or a function"
            )
        if not callable(self.tensors_to_dump):
            self.tensors_to_dump = list(self.tensors_to_dump)
        if not callable(self.dedup_policy):
            raise TypeError("TracingRule.dedup_policy must be a function of a list of entries")
        if self.dedup_keys is not None and not callable(self.dedup_keys):
            raise TypeError("TracingRule.dedup_keys must be a function of an entry or None")

    def names_to_dump(self, bound: Mapping[str, Any]) -> list[str]:
        choice = self.tensors_to_dump
        names = choice(bound) if callable(choice) else choice
        return [n for n in names if _is_tensor(bound.get(n))]

    def select(self, entries: list[TraceEntry]) -> list[TraceEntry]:
        """Group by ``dedup_keys`` (one group when unset), apply the policy to each group."""
        if self.dedup_keys is None:
            return self.dedup_policy(list(entries))
        groups: dict[Hashable, list[TraceEntry]] = {}
        for entry in entries:
            groups.setdefault(self.dedup_keys(entry), []).append(entry)
        kept = [e for group in groups.values() for e in self.dedup_policy(group)]
        return sorted(kept, key=lambda e: e.order)
