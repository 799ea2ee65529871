"""Presets of tracing: dedup policies, dump choices, generic rules, and the default rule set.

A :class:`~fib_core.tracer.types.TracingRule` pairs a *dump choice* (the inputs saved as safetensors blobs: what
random numbers cannot stand in for, such as page tables and sequence boundaries) with a
*dedup policy* (from all entries of one group, the representatives to keep) and optional
*dedup keys* (how entries are grouped before the policy runs).

Policies are plain functions ``list[TraceEntry] -> list[TraceEntry]``; dump choices are a
list of input names or a function of the bound arguments returning one.

Each definition's own rule lives in its definition folder (``tracing.py``, ``RULE``);
:func:`full_preset` collects them through the definition registry.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .types import TraceEntry, TracingRule, _is_tensor

Policy = Callable[[list[TraceEntry]], list[TraceEntry]]


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


# --- rules ----------------------------------------------------------------------------------


axes_only_rule = TracingRule(tensors_to_dump=DUMP_NONE, dedup_policy=DEDUP_BY_AXES)
"""Shapes only, one workload per distinct set of axis values."""

all_dump_rule = TracingRule(tensors_to_dump=DUMP_ALL, dedup_policy=KEEP_ALL)
"""Every call, every tensor dumped (for debugging: blobs grow fast)."""


def full_preset() -> dict[str, TracingRule]:
    """The default rules: each registered definition's own, from the ``tracing.py`` of its
    definition folder (see :mod:`fib_core.dataset.registry`); definitions without one fall back
    to :data:`axes_only_rule`.

    >>> sorted(full_preset())[0]
    'dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64'
    """
    # Imported here: the registry loads the definitions' rule files, which import this package.
    from fib_core.dataset import registry

    rules: dict[str, TracingRule] = {}
    for entry in registry.entries():
        rule = entry.tracing_rule
        if rule is None:
            continue
        if not isinstance(rule, TracingRule):
            raise registry.DefinitionFolderError(
                f"{entry.folder / 'tracing.py'}: RULE is a {type(rule).__name__}; set it to a "
                "fib_core.tracer.TracingRule(...)"
            )
        rules[entry.name] = rule
    return rules
