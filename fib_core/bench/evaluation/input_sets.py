"""A workload's input sets inside the worker: made, kept, and staged into the call buffers.

A run calls the solution on many input sets (the checked ones, then one per timed call where
memory allows), so no content repeats and a kernel replaying results by content gains
nothing. :class:`Prepared` holds them for one workload (the timing-only sets are made in a
thread while the correctness run goes on); :class:`Staging` copies one set into the buffers
the solution is called with, and poisons its outputs, in as few device copies as it can.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fib_core.bench.evaluation.check import poison_, poison_value
from fib_core.bench.evaluation.failures import Failed
from fib_core.bench.evaluation.timers import untimed_calls
from fib_core.data.trace import EvaluationStatus
from fib_core.errors import FibError

# Distinct input sets made for timing at most (one per timed call when memory allows).
MAX_INPUT_SETS = 256
# Poisoned copies of a call's outputs kept to restore them in one batched copy, at most.
POISON_TEMPLATE_BYTES = 512 << 20
# Tensors larger than this are copied on their own before a timed call, not in a batched copy:
# the batched kernel is slower than a plain copy on large tensors. GPU time per copy on an
# H100: fp8 940 MB 2.45 ms against 0.65 ms (an MoE weight: 5 ms more per timed call), fp8
# 4 MB 20 us against 8 us, fp32/bf16 16 MB 1.6x, 4 MB 1.1-1.3x.
BATCHED_COPY_MAX_BYTES = 4 << 20


@dataclass
class Prepared:
    """Everything the solution calls need for one workload."""

    sets: list[list]  # pristine input sets
    refs: dict[int, list]  # reference outputs of the sets computed so far
    working: list  # the buffers the solution is called with
    rotating: list[int]  # inputs whose content differs between sets (set by complete())
    axes: dict[str, int]  # the workload's var-axis values
    notes: list[str] = field(default_factory=list)
    compute_ref: Callable[[int], list] | None = None  # reference of set k, on demand
    # (latency ms, extra) of the reference, from the calls that produced ``refs`` (or cached)
    ref_latency: tuple[float, dict] | None = None
    total_sets: int = 0  # the sets this run uses, counting those still being made
    make_more: Callable[[], list] | None = None  # makes the timing-only sets
    more: Callable[[], list] | None = None  # waits for the thread running ``make_more``

    def start_more(self) -> None:
        """Make the timing-only sets in a thread from now on (see :meth:`complete`)."""
        if self.make_more is not None:
            self.more, self.make_more = in_thread(self.make_more), None

    def ref(self, k: int) -> list:
        """Reference outputs of input set ``k`` (the timed-only sets' are computed on demand)."""
        if k not in self.refs:
            assert self.compute_ref is not None
            self.refs[k] = self.compute_ref(k)
        return self.refs[k]

    def complete(self) -> None:
        """Before timing: add the timing-only sets once their thread is done, and find the
        inputs whose content differs between sets (recopied before each timed call)."""
        self.start_more()  # a no-op once the correctness run has started it
        if self.more is not None:
            more, self.more = self.more, None
            try:
                self.sets.extend(more())
            except Exception as err:  # as when the sets were made in the main thread
                text = str(err) if isinstance(err, FibError) else f"{type(err).__name__}: {err}"
                raise Failed(EvaluationStatus.RUNTIME_ERROR, f"inputs: {text}") from None
        self.rotating = rotating(self.sets)

    def settle(self) -> None:
        """Wait for the input thread of an evaluation that ended early (nothing outlives it);
        its sets and its error are no longer wanted."""
        more, self.more = self.more, None
        if more is not None:
            try:
                more()
            except BaseException:
                pass


def affordable_sets(first: Sequence, cfg: Any, kind: str, notes: list[str]) -> int:
    """How many input sets to make for a workload whose first set is ``first``: the
    ``num_input_sets`` checked before timing, plus one per call made while timing (warm-up
    included), so no input content repeats and a kernel replaying results by content gains
    nothing; never more than ``input_memory_fraction`` of free memory."""
    if cfg.num_input_sets == 1:
        return 1
    per_trial = untimed_calls(cfg.warmup_runs, kind) + cfg.iterations
    target = min(MAX_INPUT_SETS, cfg.num_input_sets + per_trial * cfg.num_trials)
    size = sum(v.numel() * v.element_size() for v in first if is_tensor(v))
    if size == 0:
        return target
    free = free_memory(kind)
    fit = max(1, int(cfg.input_memory_fraction * free // size) - 1)  # one more: working copy
    if fit < cfg.num_input_sets:
        notes.append(f"only {fit} input set(s) fit in memory (asked {cfg.num_input_sets})")
    return min(fit, target)


def free_memory(kind: str) -> int:
    """Free bytes of the device kind (the host's available memory for "cpu")."""
    if kind == "cuda":
        # Imported here: torch takes ~3 s to load, and importing this module does not need it.
        import torch

        free, _total = torch.cuda.mem_get_info()
        return int(free)
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError):
        return 8 << 30


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a tensor (told without importing torch)."""
    return hasattr(value, "data_ptr") and hasattr(value, "copy_")


def copy_output(value: Any) -> Any:
    """A device copy of a tensor output (later calls may reuse its buffer); other values as is.

    Only a plain ``torch.Tensor`` is copied, by torch's own method: a subclass could compute
    its content when copied, outside the timed call (the judge refuses subclasses anyway).
    """
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    return torch.Tensor.clone(value) if type(value) is torch.Tensor else value


def to_host(value: Any) -> Any:
    """A host copy of a plain tensor output (always a copy, even of a CPU tensor, whose buffer
    later calls may reuse); other values as is (see :func:`copy_output`)."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    if type(value) is torch.Tensor:
        return torch.Tensor.to(value, "cpu", copy=True)
    return value


class Staging:
    """Puts an input set into the call buffers and poisons the outputs before a call, in one
    batched device copy per dtype (tensors over :data:`BATCHED_COPY_MAX_BYTES`, or alone in
    their dtype, get a plain copy each).

    Under the profiler every operation and every kernel costs host time, and a kernel of a
    few microseconds is timed 160 times per workload. Measured on an H100 (GDN decode, 8
    inputs and 2 outputs copied): 0.63 ms of host time per timed call with one copy per
    tensor (10 kernels), the same with one ``torch._foreach_copy_`` over mixed dtypes (it
    falls back to a copy per tensor), 0.33 ms with one per dtype (2 kernels). The outputs are
    poisoned by copying from poisoned templates made once, so the poisoning joins the same
    copies (up to :data:`POISON_TEMPLATE_BYTES`; larger outputs are filled one by one).
    """

    def __init__(self, working: list, indices: Sequence[int], outputs: list | None) -> None:
        self.working = working
        self.tensors = [j for j in indices if is_tensor(working[j])]
        self.scalars = [j for j in indices if not is_tensor(working[j])]
        poisoned = [t for t in outputs or () if t is not None and poison_value(t.dtype) is not None]
        size = sum(t.numel() * t.element_size() for t in poisoned)
        self.templates = []
        if size <= POISON_TEMPLATE_BYTES:
            try:
                self.templates = [poison_(copy_output(t)) for t in poisoned]
            except RuntimeError:  # out of device memory: fill the outputs one by one instead
                self.templates = []
        self.filled = [] if self.templates else poisoned
        self.targets = [working[j] for j in self.tensors] + (poisoned if self.templates else [])
        # Positions in ``targets`` by (dtype, device): one batched copy each. A large tensor
        # is a group of its own, copied by ``copy_`` (its launch cost is nothing against its
        # bytes, and the batched kernel is slower on it: see BATCHED_COPY_MAX_BYTES).
        groups: dict[tuple[str, ...], list[int]] = {}
        for position, target in enumerate(self.targets):
            alone = target.numel() * target.element_size() > BATCHED_COPY_MAX_BYTES
            key = ("alone", str(position)) if alone else (str(target.dtype), str(target.device))
            groups.setdefault(key, []).append(position)
        self.groups = [
            ([self.targets[p] for p in positions], positions) for positions in groups.values()
        ]
        self.one_by_one: set[int] = set()  # groups whose dtype the batched copy refused

    def __call__(self, source: Sequence) -> None:
        sources = [source[j] for j in self.tensors] + self.templates
        for g, (targets, positions) in enumerate(self.groups):
            if len(targets) == 1:  # nothing to batch: one plain copy
                targets[0].copy_(sources[positions[0]])
                continue
            group_sources = [sources[p] for p in positions]
            if not copy_all(targets, group_sources, batched=g not in self.one_by_one):
                self.one_by_one.add(g)  # not asked again: a refusal costs an exception
        for j in self.scalars:
            self.working[j] = source[j]
        for t in self.filled:
            poison_(t)


def copy_all(targets: list, sources: list, batched: bool = True) -> bool:
    """``targets[i].copy_(sources[i])`` for every i, as one batched operation when torch has
    one (``torch._foreach_copy_``: one kernel when the tensors share a dtype and device) and
    ``batched``, else one by one; True when it was batched. The batched copy's GPU path does
    not know every dtype (fp4; fp8 before torch 2.5): what it refuses is copied one by one,
    as ``copy_`` copies any dtype.

    Example: ``copy_all([a, b], [x, y])`` leaves ``a`` equal to ``x`` and ``b`` to ``y``."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    foreach = getattr(torch, "_foreach_copy_", None) if batched else None
    if foreach is not None and targets:
        try:
            foreach(targets, sources)
            return True
        except (RuntimeError, NotImplementedError):
            pass  # nothing was copied: it refuses before launching
    for target, source in zip(targets, sources, strict=True):
        target.copy_(source)
    return False


def rotating(sets: list) -> list[int]:
    """Indices of the inputs whose content differs between sets (recopied before each call)."""
    return [
        j
        for j in range(len(sets[0]))
        if any(s[j] is not sets[0][j] for s in sets[1:])
        and (is_tensor(sets[0][j]) or any(s[j] != sets[0][j] for s in sets[1:]))
    ]


def in_thread(work: Callable[[], list]) -> Callable[[], list]:
    """Start ``work`` in a thread; the returned function waits for it and gives its result
    (or raises its error). Torch releases the GIL inside its operations, so the thread makes
    progress while the main thread waits on the GPU or the judge."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = work()
        except BaseException as err:  # re-raised in the waiting thread
            box["error"] = err

    thread = threading.Thread(target=run, name="input-sets", daemon=True)
    thread.start()

    def wait() -> list:
        thread.join()
        if "error" in box:
            raise box["error"]
        return box["result"]

    return wait
