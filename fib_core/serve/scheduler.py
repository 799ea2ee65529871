"""Tasks spread over the server's devices: one lane per device, each a thread that takes the
next task from one shared queue and hands it to its device's evaluation process
(:mod:`fib_core.serve.lane_process`). A lane whose process dies fails its task, starts a new
process and goes on.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fib_core.serve.lane_process import lane_main
from fib_core.serve.tasks import Task, TaskStore

log = logging.getLogger("fib_core.serve")

# How long a lane waits for its process to load torch and the dataset.
START_TIMEOUT_S = 300.0


class QueueFull(Exception):
    """As many tasks are waiting as the server allows."""


@dataclass
class Lane:
    """One device: ``device`` as the user named it ("cuda:1", "cpu"), ``device_id`` what its
    process sees in ``CUDA_VISIBLE_DEVICES`` (None on the CPU)."""

    device: str
    device_id: str | None
    started: bool = False  # its process answered once since it was (re)started
    process: Any = None
    conn: Any = None

    @property
    def healthy(self) -> bool:
        """Its evaluation process started and is still there."""
        process = self.process  # read once: the lane's thread may be replacing it
        return self.started and process is not None and process.is_alive()


class Scheduler:
    """Start with :meth:`start`; :meth:`submit` queues a task; :meth:`shutdown` stops all.

    ``devices``: (name, ``CUDA_VISIBLE_DEVICES`` value or None for the CPU) per lane.
    ``make_request(task, kind)``: the RunRequest fields for ``task`` on a device of ``kind``
    ("cuda" | "cpu"); ``on_done(task, shard)``: what to do with a finished evaluation (store
    the traces), returning the trace dicts the task reports."""

    def __init__(self, store: TaskStore, dataset_path: str,
                 devices: list[tuple[str, str | None]],
                 make_request: Callable[[Task, str], dict[str, Any]],
                 on_done: Callable[[Task, dict[str, Any]], list[dict[str, Any]]],
                 max_queued: int = 64, task_timeout: Callable[[Task], float] | None = None
                 ) -> None:
        self.store = store
        self.dataset_path = dataset_path
        self.lanes = [Lane(name, device_id) for name, device_id in devices]
        self._make_request = make_request
        self._on_done = on_done
        self._timeout = task_timeout or (lambda task: 3600.0)
        self._queue: queue.Queue[Task | None] = queue.Queue()
        self._max_queued = max_queued
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._context = multiprocessing.get_context("spawn")

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    def start(self) -> None:
        for lane in self.lanes:
            thread = threading.Thread(target=self._serve, args=(lane,), daemon=True,
                                      name=f"lane-{lane.device}")
            thread.start()
            self._threads.append(thread)

    def submit(self, task: Task) -> None:
        if self._queue.qsize() >= self._max_queued:
            raise QueueFull
        self._queue.put(task)

    def shutdown(self) -> None:
        """Stop taking tasks and end every lane's process (a running evaluation with it)."""
        self._stopping.set()
        for _ in self.lanes:
            self._queue.put(None)
        for lane in self.lanes:
            self._stop_process(lane)

    # --- one lane --------------------------------------------------------------------------

    def _serve(self, lane: Lane) -> None:
        try:
            self._ensure_process(lane)  # ready before the first task comes
        except Exception:
            log.exception("lane %s: its evaluation process did not start", lane.device)
        while not self._stopping.is_set():
            task = self._queue.get()
            if task is None or self._stopping.is_set():
                return
            if self.store.get(task.id) is None:
                continue  # dropped from the store while it waited
            self.store.running(task, lane.device)
            try:
                traces, error = self._run(lane, task)
            except Exception as err:  # a kit bug must not end the lane
                log.exception("lane %s: task %s", lane.device, task.id)
                traces, error = None, f"internal error: {type(err).__name__}: {err}"
            self.store.finish(task, traces, error)

    def _run(self, lane: Lane, task: Task) -> tuple[list[dict[str, Any]] | None, str | None]:
        if not task.workload_uuids:
            return None, "no workloads selected: workload_uuids is empty"
        self._ensure_process(lane)
        kind = "cpu" if lane.device_id is None else "cuda"
        lane.conn.send(("run", self._make_request(task, kind)))
        deadline = time.monotonic() + self._timeout(task)
        while not lane.conn.poll(0.5):
            if not lane.process.is_alive() or time.monotonic() > deadline:
                alive = lane.process.is_alive()
                self._stop_process(lane)
                return None, ("the evaluation took longer than the server allows a task; "
                              "submit fewer workloads" if alive else
                              "the evaluation process ended unexpectedly; submit again")
            if self._stopping.is_set():
                return None, "the server is shutting down"
        try:
            kind, payload = lane.conn.recv()
        except (EOFError, OSError):
            self._stop_process(lane)
            return None, "the evaluation process ended unexpectedly; submit again"
        if kind == "done":
            return self._on_done(task, payload), None
        if kind == "bug":
            log.error("lane %s, task %s:\n%s", lane.device, task.id, payload)
            return None, "internal error: " + str(payload).strip().splitlines()[-1]
        return None, str(payload)

    def _ensure_process(self, lane: Lane) -> None:
        if lane.process is not None and lane.process.is_alive():
            return
        self._stop_process(lane)
        ours, theirs = self._context.Pipe()

        process = self._context.Process(target=lane_main, daemon=True,
                                        args=(theirs, lane.device_id, self.dataset_path,
                                              os.getpid()), name=f"fib-serve-{lane.device}")
        process.start()
        theirs.close()
        lane.process, lane.conn = process, ours
        if not ours.poll(START_TIMEOUT_S):
            self._stop_process(lane)
            raise RuntimeError(f"the evaluation process of {lane.device} did not start")
        ours.recv()
        lane.started = True

    def _stop_process(self, lane: Lane) -> None:
        process, lane.process = lane.process, None
        lane.started = False
        if lane.conn is not None:
            lane.conn.close()
            lane.conn = None
        if process is not None and process.is_alive():
            process.terminate()
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join(5)
