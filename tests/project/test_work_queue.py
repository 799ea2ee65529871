"""The queue several GPUs take their workloads from: size order, two ends per lane, stealing."""

from __future__ import annotations

import multiprocessing

import pytest

from fib_core.bench.engine.work_queue import QueueTaker, WorkQueue, lane_count, queue_plan

CTX = multiprocessing.get_context("spawn")


def _drain(queue: WorkQueue, turns: list[int]) -> dict[int, list[int]]:
    """Each GPU in ``turns`` takes once, in that order, until the queue is empty."""
    taken: dict[int, list[int]] = {g: [] for g in set(turns)}
    while True:
        progressed = False
        for gpu in turns:
            index = queue.take(gpu)
            if index is not None:
                taken[gpu].append(index)
                progressed = True
        if not progressed:
            return taken


def test_order_is_by_cost_then_axes_and_lanes_split_the_cost() -> None:
    costs = [5.0, 1.0, 1.0, 3.0, 2.0, 4.0]
    axes = [{"n": 5}, {"n": 2}, {"n": 1}, {"n": 3}, {"n": 2}, {"n": 4}]
    order, lanes = queue_plan(costs, axes, gpus=2)
    assert order == [2, 1, 4, 3, 5, 0]
    assert lanes == [(0, 6)]
    order, lanes = queue_plan(costs, axes, gpus=4)  # two lanes of about 8 each
    assert lanes == [(0, 4), (4, 6)]
    assert sum(costs[i] for i in order[:4]) == 7.0 and sum(costs[i] for i in order[4:]) == 9.0
    assert queue_plan([], [], gpus=3) == ([], [(0, 0), (0, 0)])
    assert queue_plan(costs, axes, gpus=1) == (list(range(6)), [(0, 6)])  # alone: as given
    assert [lane_count(g) for g in (1, 2, 3, 4, 5)] == [1, 1, 2, 2, 3]
    with pytest.raises(ValueError):
        queue_plan([1.0], [{}], gpus=0)


def test_two_gpus_take_from_the_two_ends_and_meet() -> None:
    queue = WorkQueue(CTX, gpus=2)
    queue.fill([(0, 7)])
    assert queue.peek(0) == 0 and queue.peek(1) == 6
    taken = _drain(queue, [0, 1, 0])  # GPU 0 is twice as fast
    assert taken == {0: [0, 1, 2, 3, 4], 1: [6, 5]}
    assert queue.take(0) is None and queue.peek(1) is None


def test_a_gpu_with_an_empty_lane_takes_from_the_large_end_of_the_fullest() -> None:
    queue = WorkQueue(CTX, gpus=3)  # lanes: GPUs 0 and 1 share lane 0, GPU 2 has lane 1
    queue.fill([(0, 2), (2, 10)])
    taken = _drain(queue, [0, 1, 2])
    assert taken[0][0] == 0 and taken[1][0] == 1  # lane 0 from its two ends
    assert taken[2][0] == 2 and taken[2] == sorted(taken[2])  # lane 1 from its small end
    # then GPUs 0 and 1 help with lane 1, from its large end
    assert taken[0][1:] and all(i >= 2 for i in taken[0][1:] + taken[1][1:])
    assert sorted(i for t in taken.values() for i in t) == list(range(10))


def test_the_queue_is_shared_with_the_gpus_processes_and_each_index_taken_once() -> None:
    """Four processes take as fast as they can (two lanes, both ends, then stealing): an
    unshared queue, or one taken without its lock, hands an index out twice or never."""
    queue = WorkQueue(CTX, gpus=4)
    queue.fill([(0, 3000), (3000, 6000)])
    results = CTX.Queue()
    start = CTX.Event()
    procs = [CTX.Process(target=_take_all, args=(QueueTaker(queue, g), results, start))
             for g in range(4)]
    for proc in procs:
        proc.start()
    start.set()
    taken = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    assert sorted(i for t in taken for i in t) == list(range(6000))


def _take_all(taker: QueueTaker, results: object, start: object) -> None:
    start.wait()  # type: ignore[attr-defined]
    mine = []
    while (index := taker.take()) is not None:
        mine.append(index)
    results.put(mine)  # type: ignore[attr-defined]


def test_a_stopped_queue_hands_out_nothing() -> None:
    queue = WorkQueue(CTX, gpus=3)
    queue.fill([(0, 5), (5, 9)])
    assert queue.take(2) == 5
    queue.stop()
    assert [queue.take(g) for g in range(3)] == [None, None, None]
    assert queue.peek(0) is None


def test_wrong_use_is_refused() -> None:
    queue = WorkQueue(CTX, gpus=2)
    with pytest.raises(ValueError, match="2 lanes given for a queue of 1"):
        queue.fill([(0, 1), (1, 2)])
    with pytest.raises(ValueError, match="GPU 2"):
        queue.take(2)
    assert queue.take(0) is None  # never filled: empty
