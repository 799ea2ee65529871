"""What the tracer keeps of a definition's calls: :class:`TracingRule` and its presets.

A rule pairs a *dump choice* (the inputs saved as safetensors blobs: what random numbers cannot
stand in for, such as page tables and sequence boundaries) with a *dedup policy* (from all
entries of one group, the representatives to keep) and optional *dedup keys* (how entries are
grouped before the policy runs). Policies are plain functions ``list[TraceEntry] ->
list[TraceEntry]``; a dump choice is a list of input names or a function of the bound
arguments returning one.

These words sit below ``fib_core.dataset`` so that each definition folder's ``tracing.py``
can state its own rule without importing the tracer; ``fib_core.tracer`` (which collects the
folders' rules, records calls and writes workloads) re-exports them under the organizers'
names. Example (a definition folder's ``tracing.py``)::

    from fib_core.tracing_rules import DEDUP_BY_AXES, TracingRule

    RULE = TracingRule(tensors_to_dump=["seq_lens", "block_table"], dedup_policy=DEDUP_BY_AXES)
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# --- the rule ---------------------------------------------------------------------------------


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

    >>> from fib_core.tracing_rules import DEDUP_BY_AVG_SEQ_LEN
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


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k: found {k!r}, expected an integer >= 1")


# --- policies -------------------------------------------------------------------------------


def policy_keep_first_k(k: int) -> Policy:
    """The first ``k`` entries, in call order."""
    _check_k(k)

    def keep_first(entries: list[TraceEntry]) -> list[TraceEntry]:
        return sorted(entries, key=lambda e: e.order)[:k]

    return keep_first


def policy_keep_random_k(k: int, seed: int | None = None) -> Policy:
    """``k`` entries drawn at random (give ``seed`` for the same pick on a rerun); call order
    kept."""
    _check_k(k)

    def keep_random(entries: list[TraceEntry]) -> list[TraceEntry]:
        if len(entries) <= k:
            return list(entries)
        picked = random.Random(seed).sample(range(len(entries)), k)
        return sorted((entries[i] for i in picked), key=lambda e: e.order)

    return keep_random


def policy_dedup_by_axes(k: int = 1) -> Policy:
    """Up to ``k`` entries per distinct set of axis values (the first ones called)."""
    _check_k(k)

    def dedup_axes(entries: list[TraceEntry]) -> list[TraceEntry]:
        seen: dict[tuple, int] = {}
        kept = []
        for entry in sorted(entries, key=lambda e: e.order):
            key = tuple(sorted(entry.axes.items()))
            if seen.get(key, 0) < k:
                seen[key] = seen.get(key, 0) + 1
                kept.append(entry)
        return kept

    return dedup_axes


INDPTR_NAMES = ("cu_seqlens", "indptr", "qo_indptr", "kv_indptr", "seq_indptr")


def average_seq_len(entry: TraceEntry, names: Sequence[str] = INDPTR_NAMES) -> int | None:
    """Mean segment length of the first index-pointer input the entry holds (rounded)."""
    for name in names:
        indptr = entry.picked.get(name)
        if indptr is not None and getattr(indptr, "numel", lambda: 0)() >= 2:
            count = indptr.numel() - 1
            return round(int(indptr[-1] - indptr[0]) / count)
    return None


def policy_dedup_by_avg_seq_len(k: int = 1, indptr_names: Sequence[str] = INDPTR_NAMES) -> Policy:
    """Up to ``k`` entries per (axes, average sequence length): batches of equal shape but very
    different length mixes stay apart. The index pointer must be among the dumped inputs."""
    _check_k(k)

    def dedup_avg(entries: list[TraceEntry]) -> list[TraceEntry]:
        seen: dict[tuple, int] = {}
        kept = []
        for entry in sorted(entries, key=lambda e: e.order):
            key = (tuple(sorted(entry.axes.items())), average_seq_len(entry, indptr_names))
            if seen.get(key, 0) < k:
                seen[key] = seen.get(key, 0) + 1
                kept.append(entry)
        return kept

    return dedup_avg


def KEEP_ALL(entries: list[TraceEntry]) -> list[TraceEntry]:  # noqa: N802 (a constant policy)
    """Every entry."""
    return sorted(entries, key=lambda e: e.order)


KEEP_RANDOM_ONE = policy_keep_random_k(1, seed=0)
DEDUP_BY_AXES = policy_dedup_by_axes(1)
DEDUP_BY_AVG_SEQ_LEN = policy_dedup_by_avg_seq_len(1)


# --- dump choices ---------------------------------------------------------------------------


def DUMP_ALL(bound: Mapping[str, Any]) -> list[str]:  # noqa: N802
    """Every tensor input."""
    return [name for name, value in bound.items() if _is_tensor(value)]


def DUMP_NONE(bound: Mapping[str, Any]) -> list[str]:  # noqa: N802
    """No tensor: the workload records axes and scalars only (inputs are regenerated)."""
    return []


def DUMP_INT32(bound: Mapping[str, Any]) -> list[str]:  # noqa: N802
    """int32 tensor inputs: usually index pointers, page tables and indices."""
    return [
        name
        for name, value in bound.items()
        if _is_tensor(value) and str(value.dtype) in ("torch.int32", "int32")
    ]


def dump_int32() -> Callable[[Mapping[str, Any]], list[str]]:
    """The :data:`DUMP_INT32` choice, as a factory (the organizers' spelling)."""
    return DUMP_INT32


# --- generic rules --------------------------------------------------------------------------


axes_only_rule = TracingRule(tensors_to_dump=DUMP_NONE, dedup_policy=DEDUP_BY_AXES)
"""Shapes only, one workload per distinct set of axis values."""

all_dump_rule = TracingRule(tensors_to_dump=DUMP_ALL, dedup_policy=KEEP_ALL)
"""Every call, every tensor dumped (for debugging: blobs grow fast)."""
