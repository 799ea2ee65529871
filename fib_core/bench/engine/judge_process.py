"""Parent side of the judge: the process that holds the reference outputs and decides every
verdict, asked by the engine for each check a worker sends.

The judge runs kit code only (no solution is ever loaded there), so what it says can be
trusted; the engine relays a worker's outputs to it (:meth:`.pool.WorkerHandle.run`) and a
judge that fails or misses its deadline ends the workload (:class:`.pool.JudgeFailed`), never
the run. Its child side is :class:`fib_core.bench.evaluation.judge.JudgeServer`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fib_core.bench.engine.pool import (
    JudgeFailed,
    ReplyTimeout,
    WorkerDied,
    WorkerHandle,
    with_output_tail,
)
from fib_core.bench.evaluation.exchange import ArenaHandle
from fib_core.bench.evaluation.judge import STATUSES
from fib_core.bench.evaluation.logs import clip_text
from fib_core.bench.evaluation.protocol import EvalTask
from fib_core.bench.evaluation.verdicts import validate_latency
from fib_core.bench.evaluation.wire import WireError, send_object
from fib_core.data.trace import EvaluationStatus


class JudgeHandle(WorkerHandle):
    """The judge process: reference outputs, comparisons and reference timing."""

    def __init__(self, device: str, log_dir: Path) -> None:
        super().__init__(device, log_dir, name="judge", role="judge")
        self._task_sent = -1  # the task the judge holds: later messages name it by None
        self._arena_id = -1  # the shared output buffer the judge has mapped

    def _task_once(self, task: EvalTask) -> EvalTask | None:
        """The task the first time the judge hears of it, None after (a task carries the whole
        definition and solution: pickling it for every check cost milliseconds each)."""
        if self._task_sent == task.task_id:
            return None
        self._task_sent = task.task_id
        return task

    def _ask(self, message: tuple, deadline: float, what: str, blob: Any = b"") -> dict:
        try:
            send_object(self.conn, message, blob)
            header, _ = self._receive(deadline)
        except ReplyTimeout:
            self.kill()
            raise JudgeFailed(EvaluationStatus.TIMEOUT, f"timed out while the judge was {what} "
                              "(the reference's time counts towards the workload's)") from None
        except (WorkerDied, WireError, OSError) as err:
            tail = self.tail()
            self.kill()
            raise JudgeFailed(EvaluationStatus.RUNTIME_ERROR, with_output_tail(
                f"the judge process failed while {what} ({err}); not the solution's fault",
                tail)) from None
        if header["type"] == "failed":
            raise JudgeFailed(EvaluationStatus.RUNTIME_ERROR, "the judge failed while " + what
                              + " (not the solution's fault):\n" + str(header.get("message")))
        return header

    def announce(self, task: EvalTask) -> None:
        """Tell the judge a task has started, so it prefetches the task's cached references
        while the worker builds and makes its inputs (no reply; a dead judge shows at the
        first check)."""
        if self.conn is None or not self.alive:
            return
        try:
            send_object(self.conn, ("task", self._task_once(task)))
        except OSError:
            self._task_sent = -1

    def share_arena(self, arena: ArenaHandle) -> None:
        """Map the worker's shared output buffer in the judge, once per buffer (a failure to
        send shows at the first check)."""
        if arena.arena_id == self._arena_id or self.conn is None or not self.alive:
            return
        try:
            send_object(self.conn, arena.message(), fds=[arena.fd])
            self._arena_id = arena.arena_id
        except OSError:
            self._arena_id = -1

    def announce_next(self, workload: dict) -> None:
        """Name the workload that comes after the announced task (no reply)."""
        if self.conn is None or not self.alive:
            return
        try:
            send_object(self.conn, ("next", workload))
        except OSError:
            pass

    def check(self, task: EvalTask, request: dict, blob: bytes, deadline: float) -> dict:
        header = self._ask(("check", self._task_once(task), request["set"], request["sets"],
                            request["outputs"],
                            (request["arena"], request["slot"]) if "slot" in request else None),
                           deadline,
                           "checking outputs", blob)
        status = header.get("status")
        if header["type"] != "verdict" or status not in STATUSES:
            raise JudgeFailed(EvaluationStatus.RUNTIME_ERROR, "the judge answered an unexpected message")
        if header.get("judge_error"):
            raise JudgeFailed(EvaluationStatus.RUNTIME_ERROR, clip_text(str(header.get("message"))))
        return {"status": status, "message": clip_text(str(header.get("message", ""))),
                "correctness": header.get("correctness")
                if isinstance(header.get("correctness"), dict) else None}

    def latency(self, task: EvalTask, n_sets: int, deadline: float) -> dict:
        header = self._ask(("latency", self._task_once(task), n_sets), deadline,
                           "timing the reference")
        if header["type"] != "latency":
            raise JudgeFailed(EvaluationStatus.RUNTIME_ERROR, "the judge answered an unexpected message")
        try:
            return validate_latency(header)
        except WireError as err:
            raise JudgeFailed(EvaluationStatus.RUNTIME_ERROR, str(err)) from None

    def forget(self) -> None:
        self._task_sent = -1
        if self.conn is not None and self.alive:
            try:
                send_object(self.conn, ("forget",))
            except OSError:
                pass
