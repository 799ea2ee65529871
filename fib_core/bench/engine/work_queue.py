"""The queue several GPUs' processes take their workloads from, one at a time, as each is free.

Why not a split fixed before the run: a workload's cost is known only roughly beforehand (a
first run pays the reference and the solution's compiles, a warm re-run neither), so a fixed
split leaves one GPU idle while the other finishes; and when both GPUs meet the same shapes at
the same time, both compile the same kernel specialisations (Triton's disk cache is shared,
but only a finished compile is found there), so part of the compile time was paid twice.

The queue is the selection in size order (cost, then axes), cut into lanes of near-equal cost,
one lane per pair of GPUs. In a lane one GPU takes from the small end and the other from the
large end: they meet where the lane's work is shared out, and each has met shapes of its own,
so a kernel specialisation is mostly compiled by one GPU. A GPU whose lane is empty takes from
the large end of the lane with the most left (an odd GPU count leaves one lane to one GPU).

Example (what a run on two GPUs does; ``take`` runs in each GPU's process)::

    order, lanes = queue_plan(costs, axes_list, gpus=2)   # size order, lane bounds
    queue = WorkQueue(multiprocessing.get_context("spawn"), gpus=2)
    queue.fill(lanes)
    queue.take(0)   # 0: the smallest workload (index into ``order``)
    queue.take(1)   # len(order) - 1: the largest
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from fib_core.errors import FibError

# A GPU's process holds the queue's lock for microseconds; one that died holding it (killed
# by a signal of its own inside take) would leave the others waiting for ever.
LOCK_TIMEOUT_S = 60.0


def lane_count(gpus: int) -> int:
    """One lane per pair of GPUs (an odd one out gets a lane of its own)."""
    return (gpus + 1) // 2


@dataclass
class QueuePlan:
    """A run on several GPUs: one request per GPU (each holding the queue's order, as
    positions in the run's selection) and the queue's lanes
    (:func:`queue_plan`)."""

    requests: list[Any]
    lanes: list[tuple[int, int]]


def queue_plan(
    costs: Sequence[float], axes_list: Sequence[dict[str, int]], gpus: int
) -> tuple[list[int], list[tuple[int, int]]]:
    """(order, lanes): the workloads' indices in size order (cost, then axes values), and each
    lane's [start, end) in that order, lanes of near-equal total cost. One GPU: the given
    order, one lane."""
    if gpus < 1:
        raise ValueError("gpus must be >= 1")
    if gpus == 1:  # nothing to share: the dataset's order, as a run in the launcher has it
        return list(range(len(costs))), [(0, len(costs))]
    order = sorted(range(len(costs)),
                   key=lambda i: (costs[i], sorted(axes_list[i].items()), i))
    lanes = lane_count(gpus)
    total = sum(costs[i] for i in order)
    bounds: list[tuple[int, int]] = []
    start, running = 0, 0.0
    for lane in range(lanes):
        if lane == lanes - 1:
            end = len(order)
        else:
            goal = total * (lane + 1) / lanes
            end = start
            while end < len(order) and running + costs[order[end]] / 2 <= goal:
                running += costs[order[end]]
                end += 1
        bounds.append((start, end))
        start = end
    return order, bounds


class WorkQueue:
    """Lane bounds in shared memory ([start, end) per lane, under one lock), made before the
    GPUs' processes start (they inherit it) and filled when the run's selection is known.

    GPU ``g`` belongs to lane ``g // 2``: an even ``g`` takes from the lane's small end, an odd
    one from its large end; with its lane empty, a GPU takes from the large end of the lane
    with the most left. :meth:`take` and :meth:`peek` return an index into the queue's order,
    or None when every lane is empty."""

    def __init__(self, ctx: Any, gpus: int) -> None:
        self.gpus = gpus
        self.lanes = lane_count(gpus)
        self._bounds = ctx.Array("q", 2 * self.lanes)  # zeros: empty until filled

    def fill(self, lanes: Sequence[tuple[int, int]]) -> None:
        if len(lanes) != self.lanes:
            raise ValueError(f"{len(lanes)} lanes given for a queue of {self.lanes}")
        with self._locked():
            for k, (start, end) in enumerate(lanes):
                self._bounds[2 * k], self._bounds[2 * k + 1] = start, end

    def stop(self) -> None:
        """Empty every lane: the GPUs finish the workload they hold and take no other (one
        GPU failed, and the run ends with its error rather than after the rest)."""
        with self._locked():
            for k in range(self.lanes):
                self._bounds[2 * k] = self._bounds[2 * k + 1]

    @contextmanager
    def _locked(self) -> Iterator[None]:
        lock = self._bounds.get_lock()
        if not lock.acquire(timeout=LOCK_TIMEOUT_S):
            raise FibError(
                f"the GPUs' shared workload queue stayed locked for {LOCK_TIMEOUT_S:g} s (a GPU "
                "process was killed while taking a workload); run again"
            )
        try:
            yield
        finally:
            lock.release()

    def take(self, gpu: int) -> int | None:
        """The next index for ``gpu``, removed from the queue."""
        with self._locked():
            lane, from_end = self._pick(gpu)
            if lane is None:
                return None
            if from_end:
                self._bounds[2 * lane + 1] -= 1
                return self._bounds[2 * lane + 1]
            self._bounds[2 * lane] += 1
            return self._bounds[2 * lane] - 1

    def peek(self, gpu: int) -> int | None:
        """What :meth:`take` would return now (the other GPUs may take it first)."""
        with self._locked():
            lane, from_end = self._pick(gpu)
            if lane is None:
                return None
            return self._bounds[2 * lane + 1] - 1 if from_end else self._bounds[2 * lane]

    def _pick(self, gpu: int) -> tuple[int | None, bool]:
        if not 0 <= gpu < self.gpus:
            raise ValueError(f"GPU {gpu} is not one of this queue's {self.gpus}")
        b = self._bounds
        own = gpu // 2
        if b[2 * own] < b[2 * own + 1]:
            return own, gpu % 2 == 1
        left = [b[2 * k + 1] - b[2 * k] for k in range(self.lanes)]
        fullest = max(range(self.lanes), key=lambda k: (left[k], -k))
        return (fullest, True) if left[fullest] > 0 else (None, False)


class QueueTaker:
    """One GPU's view of a :class:`WorkQueue`: ``take()`` and ``peek()`` with its index bound
    (what :class:`fib_core.bench.engine.stream.WorkloadStream` reads)."""

    def __init__(self, queue: WorkQueue, gpu: int) -> None:
        self.queue, self.gpu = queue, gpu

    def take(self) -> int | None:
        return self.queue.take(self.gpu)

    def peek(self) -> int | None:
        return self.queue.peek(self.gpu)
