"""Verdicts decided outside the solution's process.

Three roles; the rules of who may decide what are written here, once:

* :class:`RemoteChecker` (worker side, untrusted process): instead of comparing against
  reference outputs it does not have, the worker checks the structure of the outputs against
  the definition (shapes, dtypes: a failure there only hurts the solution itself), hands the
  outputs over as bytes (in a slot of the shared output buffer, :mod:`fib_core.bench.evaluation.exchange`,
  or after the request) and later reads the verdict (checks are pipelined, verdicts read in
  order).
* :class:`JudgeServer` (judge process: kit code only, never a solution): generates the same
  inputs from the seed, computes (or loads from the signed cache) the reference outputs,
  compares, and times the reference. Reference outputs never leave this process.
* :class:`~fib_core.bench.evaluation.verdicts.TaskLedger` (parent, :mod:`.verdicts`): relays checks, remembers every verdict, and turns the
  worker's final report into the result. A worker may report a failure on its own (it can only
  hurt itself); PASSED stands only if the judge passed every required check, and the
  correctness numbers and the reference latency are the judge's, never the worker's.

What stays in the worker and can therefore be forged by a hostile solution: its own latency
(timing is in-process) and the in-place input mutation check (which only ever fails a solution).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fib_core.bench.evaluation.check import check_outputs, check_structure, checker_for
from fib_core.bench.evaluation.inputs import generate_inputs
from fib_core.bench.evaluation.reference import reference_keys, reference_outputs
from fib_core.bench.evaluation.reference_sets import checked_indices
from fib_core.bench.evaluation.signed_cache import SignedReferenceCache
from fib_core.bench.evaluation.tolerance import resolve_tolerance
from fib_core.bench.evaluation.wire import ITEMSIZE, decode_values, encode_values
from fib_core.bench.integrity import ensure_key
from fib_core.checking import CheckResult
from fib_core.data.definition import Definition
from fib_core.data.dtypes import torch_dtype
from fib_core.data.json_io import json_safe
from fib_core.data.trace import Correctness, EvaluationStatus
from fib_core.data.workload import Workload

STATUSES = tuple(status.value for status in EvaluationStatus)
MAX_SETS = 4096
MAX_EXTRA_BYTES = 256 << 10
ESSENTIAL_EXTRAS = ("seed", "device", "solution_hash", "runner", "timing", "num_input_sets")


# --- worker side -------------------------------------------------------------------------------


class RemoteChecker:
    """The worker's checks, decided by the judge.

    :meth:`submit` pipelines: it sends the outputs now and returns a function that waits for
    the verdict, so the worker makes its next call while the parent and the judge work.
    Verdicts come back in the order the requests were sent; at most ``MAX_IN_FLIGHT`` are
    awaited at once, so the parent's verdicts always fit in the socket's buffer.
    """

    MAX_IN_FLIGHT = 8

    def __init__(self, send: Any, receive: Any) -> None:
        self.send = send  # send(header, blob): one check request to the parent
        self.receive = receive  # receive() -> the next verdict dict
        self._waiting: deque[dict] = deque()  # sent, verdict not received yet
        # The shared output buffer the parent gave this worker (fib_core.bench.evaluation.exchange);
        # None: outputs travel as bytes in the request.
        self.arena: Any = None

    def submit(
        self, definition: Any, outputs: Sequence, set_index: int, prep: Any, label: str
    ) -> Callable[[], Any]:
        device = next((t.device.type for t in prep.sets[0] if hasattr(t, "device")), None)
        failed = check_structure(
            definition, outputs, expected_like(definition, prep.axes), device=device
        )
        if failed is not None:
            return lambda: failed
        arena = self.arena
        limit = self.MAX_IN_FLIGHT if arena is None else min(self.MAX_IN_FLIGHT, arena.slots)
        while len(self._waiting) >= limit:  # with an arena: the slot taken next is free
            self._waiting.popleft()["verdict"] = self.receive()
        header: dict = {"type": "check", "set": set_index, "sets": prep.total_sets, "label": label}
        try:
            if arena is None or _payload(outputs) > arena.slot_bytes:
                specs, blob = encode_values(outputs)  # bytes, as without a shared buffer
            else:
                slot = arena.take()
                arena.pin()  # page-locked once this process has its CUDA context
                specs, blob = encode_values(outputs, into=arena.region(slot, arena.slot_bytes))
                header.update(arena=arena.arena_id, slot=slot)
        except (TypeError, ValueError) as err:
            result = CheckResult(EvaluationStatus.INCORRECT_SHAPE, None, str(err))
            return lambda: result
        header["outputs"] = specs
        ticket: dict = {}
        self.send(header, blob)
        self._waiting.append(ticket)

        def verdict() -> Any:
            while "verdict" not in ticket:
                self._waiting.popleft()["verdict"] = self.receive()
            got = ticket["verdict"]
            return CheckResult(
                EvaluationStatus(got["status"]),
                correctness_from(got.get("correctness")),
                got.get("message", ""),
            )

        return verdict

    def drain(self) -> None:
        """Receive the verdicts nobody waited for (an evaluation that stopped at an earlier
        failure), so the next task's messages are not read as this one's."""
        while self._waiting:
            self._waiting.popleft()["verdict"] = self.receive()


def _payload(outputs: Sequence) -> int:
    """Bytes the tensors among ``outputs`` take (what a shared-buffer slot must hold)."""
    return sum(v.numel() * v.element_size() for v in outputs if hasattr(v, "element_size"))


def expected_like(definition: Any, axes: dict) -> list:
    """Stand-ins with the declared shape and dtype (no memory), for the structure check."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    shapes = definition.output_shapes(axes)
    like: list[Any] = []
    for name, spec in definition.outputs.items():
        shape = shapes[name]
        like.append(
            0 if shape is None else torch.empty(shape, dtype=torch_dtype(spec.dtype), device="meta")
        )
    return like


def expected_output_bytes(definition: Any, axes: dict) -> int | None:
    """Bytes of one set of output tensors as declared (scalar outputs travel in the request's
    header); the parent caps what a worker may send by it and sizes the shared buffer."""
    total = 0
    shapes = definition.output_shapes(axes)
    for name, spec in definition.outputs.items():
        shape = shapes[name]
        if shape is None:
            continue
        size = ITEMSIZE.get(str(torch_dtype(spec.dtype)).removeprefix("torch."), 8)
        total += math.prod(shape) * size
    return total


def correctness_from(raw: Any) -> Any:
    """A ``Correctness`` from a message's JSON (errors as numbers or their strings); None when it
    is not one."""
    if not isinstance(raw, dict):
        return None

    fixed = dict(raw)
    for name in ("max_relative_error", "max_absolute_error"):
        if isinstance(fixed.get(name), str):
            try:
                fixed[name] = float(fixed[name])
            except ValueError:
                return None
    try:
        return Correctness.from_dict(fixed)
    except Exception:
        return None


# --- judge process -----------------------------------------------------------------------------


class _LazySets:
    """Input set k of a workload, generated on first use (the judge needs only a few)."""

    def __init__(self, make: Any, count: int) -> None:
        self.make, self.count, self.cache = make, count, {}

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, k: int) -> list:
        if not 0 <= k < self.count:
            raise IndexError(k)
        if k not in self.cache:
            self.cache[k] = self.make(k)
        return self.cache[k]


@dataclass
class _TaskState:
    task_id: int
    definition: Any
    workload: Any
    cfg: Any
    sets: _LazySets
    refs: dict[int, list] | None = None  # the checked sets' and the re-check pool's
    latency: tuple[float, dict] | None = None
    reference_seconds: float = 0.0  # the reference pass, for the trace's phase breakdown


class JudgeServer:
    """Reference outputs, comparisons and reference timing for the engine.

    The first check of a workload runs the Evaluator's reference pass (outputs of every set a
    run may check, disk-cached and signed, and the reference latency from the same calls)
    while the worker waits for that verdict alone, so the two never compete for the device;
    :meth:`announce` only reads and verifies files ahead of it, on the CPU.
    """

    def __init__(self, evaluator: Any) -> None:
        self.evaluator = evaluator
        # On a GPU, references are read into page-locked memory: each is copied to the device.
        device = str(evaluator.device)
        evaluator.ref_cache = SignedReferenceCache(
            ensure_key(), pin_device=device if device.startswith("cuda") else None
        )
        self.state: _TaskState | None = None
        self._announced: tuple[int, Any, Any] | None = None  # (task id, definition, workload)
        self._announced_cfg: Any = None

    def announce(self, task: Any) -> None:
        """A task has started in the worker: read and verify the cached reference outputs of
        every set its run may check, in a thread, while the worker builds and makes inputs.

        Only disk and CPU work starts here (the worker is not timing yet, and the first check
        waits for the thread): the reference runs and device copies still happen at the first
        check, so the judge runs nothing on the GPU while the worker times. The reads land in
        page-locked host memory (integrity.PinnedPool): its blocks are page-locked once, in
        the first workloads (a host-side call, no GPU work), and reused after.
        """
        definition = Definition.from_dict(task.definition)
        workload = Workload.from_dict(task.workload)
        self._announced = (task.task_id, definition, workload)  # parsed once per task
        self._announced_cfg = task.config
        keys = self._checked_keys(definition, workload, task.config)
        self.evaluator.ref_cache.forget_prefetched()  # what an ended task left unread
        self.evaluator.ref_cache.prefetch_in_background(definition, keys)

    def _checked_keys(self, definition: Any, workload: Any, cfg: Any) -> list[str]:
        """Cache keys of every set a run of ``workload`` may check (the checked sets and the
        re-check pool)."""
        return reference_keys(
            definition, workload, seed=cfg.seed, device_kind=self.evaluator.kind,
            input_sets=checked_indices(MAX_SETS, cfg.num_input_sets, cfg.num_trials),
        )

    def announce_next(self, workload: dict) -> None:
        """The workload that follows the announced task (same definition and settings): read
        its cached reference files once the current task's are in (see
        :meth:`fib_core.bench.evaluation.signed_cache.SignedReferenceCache.prefetch_upcoming`)."""
        if self._announced is None:
            return
        _, definition, _ = self._announced
        keys = self._checked_keys(definition, Workload.from_dict(workload), self._announced_cfg)
        self.evaluator.ref_cache.prefetch_upcoming(definition, keys)

    def _task(self, task: Any, n_sets: int) -> _TaskState:
        if self.state is not None and self.state.task_id == task.task_id:
            return self.state

        if self._announced is not None and self._announced[0] == task.task_id:
            _, definition, workload = self._announced
        else:
            definition = Definition.from_dict(task.definition)
            workload = Workload.from_dict(task.workload)
        cfg = task.config
        blob_cache: dict = {}
        device = self.evaluator.device

        def make(k: int) -> list:
            return generate_inputs(
                definition,
                workload,
                seed=cfg.seed,
                device=device,
                dataset_root=task.dataset_root,
                input_set=k,
                blob_cache=blob_cache,
            )

        self.state = _TaskState(
            task.task_id, definition, workload, cfg, _LazySets(make, max(1, n_sets))
        )
        return self.state

    def _references(self, st: _TaskState) -> dict[int, list]:
        if st.refs is None:
            started = time.perf_counter()
            try:
                with self.evaluator._reference_errors():
                    st.refs, st.latency = self.evaluator._references(
                        st.definition, st.workload, st.sets, st.cfg
                    )
            finally:
                st.reference_seconds = round(time.perf_counter() - started, 3)
        return st.refs

    def _reference(self, st: _TaskState, k: int) -> list:
        refs = self._references(st)
        if k not in refs:
            with self.evaluator._reference_errors():
                refs[k], _ = reference_outputs(
                    st.definition,
                    st.workload,
                    st.sets[k],
                    seed=st.cfg.seed,
                    device=self.evaluator.device,
                    input_set=k,
                    cache=self.evaluator.ref_cache,
                )
        return refs[k]

    def check(self, task: Any, set_index: int, n_sets: int, specs: list, blob: bytes) -> dict:
        """The verdict on one set of outputs (already validated by the parent)."""
        st = self._task(task, n_sets)
        if set_index >= len(st.sets):
            return {"status": EvaluationStatus.RUNTIME_ERROR, "message": f"input set {set_index} does not exist"}
        try:
            want = self._reference(st, set_index)
        except Exception as err:  # the Evaluator's _Failed: the reference's fault
            return {
                "status": EvaluationStatus.RUNTIME_ERROR,
                "judge_error": True,
                "message": getattr(err, "log", None) or f"reference failed: {err}",
            }
        got = decode_values(specs, blob, self.evaluator.device)
        tol = resolve_tolerance(st.definition, st.cfg)
        # Only a definition's own checker reads the inputs; the elementwise rule needs none.
        inputs = st.sets[set_index] if checker_for(st.definition)[1] is not None else None
        result = check_outputs(st.definition, got, want, tolerance=tol, inputs=inputs)
        corr = result.correctness.to_dict() if result.correctness is not None else None
        return {
            "status": result.status.value,
            "message": result.message,
            "correctness": json_safe(corr) if corr is not None else None,
        }

    def reference_latency(self, task: Any, n_sets: int) -> dict:
        """The reference latency measured (or loaded from the signed cache) in this process."""
        st = self._task(task, n_sets)
        self._references(st)
        seconds = st.reference_seconds
        if not st.cfg.profile_baseline or st.latency is None:
            return {"latency_ms": 0.0, "extra": {"skipped": True}, "seconds": seconds}
        ms, extra = st.latency
        return {"latency_ms": float(ms), "extra": json_safe(extra), "seconds": seconds}

    def forget(self) -> None:
        self.state = None
        self.evaluator.ref_cache.forget_prefetched()
