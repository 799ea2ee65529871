"""Parent side of a worker: start it, hand it a task, wait with a timeout, kill and replace it.

Every solution call happens in a worker process, so whatever it does (hang, segfault, corrupt
the CUDA context, call ``os._exit``) the engine survives: a hang is killed once no progress was
reported for ``timeout_seconds`` and recorded as TIMEOUT; a dead worker becomes RUNTIME_ERROR
with the last lines it printed. The worker runs in its own session, so killing it also kills
anything it started; processes that left the session are found by the run token in their
environment and killed too (:func:`fib_core.bench.containment.sandbox.kill_tagged`).

Nothing a worker sends is trusted: frames are read with size limits and deadlines
(:mod:`fib_core.bench.evaluation.wire`); a malformed one ends that solution's workload as RUNTIME_ERROR
and the worker is replaced. The worker's outputs are relayed to the judge process
(:mod:`fib_core.bench.evaluation.judge`), whose verdicts alone can make a workload PASSED.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from fib_core.bench.containment.mounts import Mounts
from fib_core.bench.containment.sandbox import TOKEN_VAR, kill_tagged
from fib_core.bench.engine.child_command import child_command, child_pythonpath
from fib_core.bench.evaluation import exchange
from fib_core.bench.evaluation.exchange import ArenaHandle
from fib_core.bench.evaluation.logs import clip_text, read_bounded
from fib_core.bench.evaluation.protocol import EvalResult, EvalTask
from fib_core.bench.evaluation.timeline import mark
from fib_core.bench.evaluation.verdicts import (
    TaskLedger,
    final_result,
    validate_check,
    validate_result,
)
from fib_core.bench.evaluation.wire import (
    DEFAULT_MAX_BLOB,
    ChildGone,
    WireError,
    read_frame,
    send_object,
)
from fib_core.bench.integrity import key_dir
from fib_core.data.trace import EvaluationStatus
from fib_core.paths import private_temp_dir

TAIL_LINES = 30
STARTUP_TIMEOUT_S = 180.0


class Judge(Protocol):
    """What a worker's task asks of the judge (:class:`.judge_process.JudgeHandle` is it): the
    worker's shared buffer mapped, the task announced, its checks and reference latency
    answered, its state dropped at the end."""

    def share_arena(self, arena: ArenaHandle) -> None: ...
    def announce(self, task: EvalTask) -> None: ...
    def announce_next(self, workload: dict) -> None: ...
    def check(self, task: EvalTask, request: dict, blob: bytes, deadline: float) -> dict: ...
    def latency(self, task: EvalTask, n_sets: int, deadline: float) -> dict: ...
    def forget(self) -> None: ...


class WorkerDied(Exception):
    """The worker ended (or never became ready) without answering."""


class ReplyTimeout(Exception):
    """A child did not answer before the task's deadline."""


class WorkerHandle:
    """One child process (a worker, or the judge with ``role="judge"``)."""

    def __init__(self, device: str, log_dir: Path, *, name: str = "worker", role: str = "worker",
                 mounts: Mounts | None = None, trusted: bool = False,
                 context_at_start: bool = False) -> None:
        self.requested_device = device
        # Make the CUDA context while booting: only a worker nothing else times beside (a
        # run's first, a replacement), never a spare (fib_core.bench.evaluation.worker).
        self.context_at_start = context_at_start
        self.role = role
        self.mounts = mounts if mounts is not None else Mounts()  # the worker's sandbox
        self.trusted = trusted
        self.log_path = log_dir / f"{name}-{os.getpid()}-{time.monotonic_ns()}.log"
        # The child's TMPDIR: whatever it leaves there goes when it is killed, so a worker that
        # is killed rather than asked to close (isolated runs) leaves no build folders behind.
        self.tmp_dir = log_dir / f"tmp-{self.log_path.stem}"
        self.proc: subprocess.Popen | None = None
        self.conn: socket.socket | None = None
        self.device: str | None = None
        self.env: Any = None
        self.warnings: list[str] = []
        self.token = secrets.token_hex(12)
        self.tainted = False
        self.early_environment: str | None = None  # set by launch_early (the cache folder)
        self.arena: ArenaHandle | None = None  # the shared output buffer this worker writes

    # --- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        """Launch the process (unless it was launched early) and wait until it is ready (or
        raise WorkerDied)."""
        if self.proc is None:
            self.launch()
        self.wait_ready(timeout)

    def child_env(self) -> dict[str, str]:
        """The child's environment: ours, plus its token and private TMPDIR. The judge also
        gets a Triton cache of its own inside the folder workers never see (the signing
        key's): it runs Triton kernels (fast references), and Triton loads compiled kernels
        and launcher libraries from its cache, so a cache a solution could write to would let
        it put code into the judge."""
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        env[TOKEN_VAR] = self.token
        env["TMPDIR"] = str(self.tmp_dir)
        if self.role == "judge":
            triton_home = key_dir() / "triton"
            env["TRITON_HOME"] = str(triton_home)
            env["TRITON_CACHE_DIR"] = str(triton_home / "cache")
        return env

    def launch(self) -> None:
        """Start the process without waiting for it (so that two can boot side by side)."""
        parent, child = socket.socketpair()
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        env = self.child_env()
        env["PYTHONPATH"] = child_pythonpath(env.get("PYTHONPATH", ""))
        if self.requested_device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        args = child_command(self.role, self.requested_device, child.fileno(), token=self.token,
                             mounts=self.mounts, trusted=self.trusted,
                             context_at_start=self.context_at_start)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            self.proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(child.fileno(),), env=env, start_new_session=True,
            )
        finally:
            log.close()
            child.close()
        self.conn = parent
        mark("spawner", f"{self.role}-launched")

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        """Wait for the launched process's greeting; WorkerDied if it does not come."""
        try:
            header, _ = self._receive(time.monotonic() + timeout)
        except (WorkerDied, WireError, ReplyTimeout) as err:
            self.kill()
            raise WorkerDied(f"the benchmark {self.role} failed to start ({err}):\n"
                             f"{self.tail()}") from None
        if header["type"] != "ready" or not isinstance(header.get("device"), str):
            detail = header.get("text") if header["type"] == "error" else self.tail()
            self.kill()
            raise WorkerDied(f"the benchmark {self.role} failed to start:\n{clip_text(str(detail))}")
        self.device = header["device"]
        mark("spawner", f"{self.role}-ready")
        warnings = header.get("warnings")
        self.warnings = [clip_text(str(w), 500) for w in warnings[:10]] \
            if isinstance(warnings, list) else []
        if isinstance(header.get("env"), dict) and (self.role == "judge" or self.trusted):
            # A sandboxed worker's account of its environment is not used: the judge's is.
            from fib_core.bench.evaluation.environment import EnvironmentInfo

            try:
                self.env = EnvironmentInfo(**header["env"])
            except TypeError:
                self.kill()
                raise WorkerDied(f"the benchmark {self.role} sent a malformed greeting") from None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        """Ask the child to exit; kill it (and anything it started) if it does not soon."""
        close_all([self])

    def _ask_to_close(self) -> bool:
        """Send the child its ``close``; False when it is not there to get it."""
        if self.proc is None or not self.alive or self.conn is None:
            return False
        try:
            send_object(self.conn, ("close",))
        except OSError:
            return False
        return True

    def kill(self) -> None:
        """SIGKILL the child's process group and every process still carrying its token."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the group outlives a dead leader
            except (ProcessLookupError, PermissionError):
                pass
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            kill_tagged(self.token)
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.arena is not None:
            self.arena.close()
            self.arena = None

    def _share_arena(self, judge: Judge, needed: int | None) -> None:
        """Give this worker (and the judge) a shared output buffer with slots of at least
        ``needed`` bytes, unless the current one is big enough. Outputs of unknown size, a
        system without sealed memfds, or a buffer that cannot be made keep sending bytes
        (fib_core.bench.evaluation.exchange): the worker is then told it has no buffer."""
        if needed is None or not exchange.supported() or self.conn is None:
            return
        if self.arena is not None and self.arena.slot_bytes >= needed:
            judge.share_arena(self.arena)
            return
        arena = None
        if needed <= exchange.MAX_SLOT_BYTES:
            try:
                arena = exchange.ArenaHandle.create(needed)
            except OSError:
                pass
        if arena is None and self.arena is None:
            return  # the worker has none already
        try:
            if arena is None:
                send_object(self.conn, exchange.NO_ARENA)
            else:
                send_object(self.conn, arena.message(), fds=[arena.fd])
        except OSError:  # the worker is gone: the task's own send reports it
            if arena is not None:
                arena.close()
            return
        if self.arena is not None:
            self.arena.close()
        self.arena = arena
        if arena is not None:
            judge.share_arena(arena)

    # --- one task --------------------------------------------------------------------------

    def run(self, task: EvalTask, timeout: float,
            on_phase: Callable[[str], None] | None = None, *, judge: Judge | None = None,
            n_outputs: int = 1, max_output_bytes: int | None = None,
            upcoming: dict | None = None) -> EvalResult:
        """Send a task and wait at most ``timeout`` seconds for the whole workload (build,
        inputs, reference, run, timing), as config.toml and the organizers define it.

        Check requests are relayed to ``judge``; the worker's final report is validated and
        turned into the result by :func:`fib_core.bench.evaluation.verdicts.final_result`. ``upcoming`` (the
        next workload's dict, same definition) lets the judge read its cached references
        while this one runs.
        """
        offset = self._log_size()
        if not self._start_task(task, judge, max_output_bytes, upcoming):
            return self._died(task, offset, "the worker was gone before the task started")
        deadline = time.monotonic() + timeout
        phase = "start"
        cfg = task.config
        ledger = TaskLedger(cfg.num_input_sets, cfg.num_trials)
        max_blob = (max_output_bytes if max_output_bytes is not None else DEFAULT_MAX_BLOB)
        try:
            while True:
                try:
                    header, blob = self._receive(deadline, max_blob=max_blob + 4096)
                except ReplyTimeout:
                    self.kill()
                    log = (f"timed out after {timeout:g} s for the workload, in phase '{phase}' "
                           "(killed the worker)")
                    return EvalResult(task.task_id, EvaluationStatus.TIMEOUT, with_output_tail(log, self.tail(offset)))
                kind = header["type"]
                if header.get("task") != task.task_id:
                    raise WireError(f"a {kind[:40]!r} message for another task")
                if kind == "phase" and isinstance(header.get("name"), str):
                    phase = header["name"][:40]
                    if on_phase is not None:
                        on_phase(phase)
                elif kind == "check" and judge is not None:
                    request = validate_check(header, blob, n_outputs, self.arena)
                    ledger.admit()
                    phase = "check (judge)"
                    verdict = judge.check(task, request, blob, deadline)
                    ledger.record(request, verdict)
                    send_object(self.conn, ("verdict", verdict))
                elif kind == "result":
                    return self._finish(task, validate_result(header), judge, ledger, deadline)
                else:
                    raise WireError(f"unexpected message {kind[:40]!r} from the worker")
        except WorkerDied as err:
            return self._died(task, offset, str(err))
        except WireError as err:
            return self._died(task, offset, f"the worker sent a malformed message ({err})")
        except JudgeFailed as err:
            self.kill()
            return EvalResult(task.task_id, err.status, clip_text(str(err)))
        finally:
            if judge is not None:
                judge.forget()  # however the task ended: the judge drops its state and prefetch

    def _start_task(self, task: EvalTask, judge: Judge | None,
                    max_output_bytes: int | None, upcoming: dict | None) -> bool:
        """Hand the worker ``task`` (and the judge its announcement); False if the worker is
        gone."""
        assert self.conn is not None
        if judge is not None:
            self._share_arena(judge, max_output_bytes)
        try:
            send_object(self.conn, ("eval", task))
        except OSError:
            return False
        if judge is not None:
            judge.announce(task)
            if upcoming is not None:
                judge.announce_next(upcoming)
        return True

    def _finish(self, task: EvalTask, report: dict, judge: Judge | None,
                ledger: TaskLedger, deadline: float) -> EvalResult:
        """The task's result from the worker's final report: the judge's verdicts and, for a
        pass, the reference latency it measures."""
        self.tainted = report["tainted"]
        latency = None
        if (report["status"] == EvaluationStatus.PASSED and judge is not None
                and task.config.profile_baseline and ledger.failure is None):
            n_sets = report["extra"].get("num_input_sets", 1)
            n_sets = n_sets if isinstance(n_sets, int) else 1
            latency = judge.latency(task, max(1, min(n_sets, 4096)), deadline)
        if judge is None and self.trusted:
            return _trusted_result(task.task_id, report)
        result = final_result(task.task_id, report, ledger, latency)
        if report["status"] == EvaluationStatus.PASSED and result.status != EvaluationStatus.PASSED:
            self.kill()  # it claimed a pass the judge did not give: retire it
        return result

    def _receive(self, deadline: float, max_blob: int = 0) -> tuple[dict, bytes]:
        """Next frame; ReplyTimeout at the deadline; WorkerDied if the process ended."""
        if self.conn is None:
            raise WorkerDied("the worker is not running")
        try:
            frame = read_frame(self.conn, deadline, max_blob=max_blob,
                               alive=lambda: self.alive)
        except ChildGone:
            raise WorkerDied(self._exit_text()) from None
        except OSError as err:
            raise WorkerDied(f"{self._exit_text()} ({err})") from None
        if frame is None:
            raise ReplyTimeout()
        return frame

    def _died(self, task: EvalTask, offset: int, reason: str) -> EvalResult:
        self.kill()
        return EvalResult(task.task_id, EvaluationStatus.RUNTIME_ERROR, with_output_tail(reason, self.tail(offset)))

    def _exit_text(self) -> str:
        if self.proc is None:
            return "the worker is not running"
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the worker closed its connection"
        if 128 < code < 160:  # the sandbox's init relays a signal death as 128 + signal
            code = -(code - 128)
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"the worker process died ({name})"
        return f"the worker process exited with status {code}"

    # --- the worker's output ---------------------------------------------------------------

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def tail(self, offset: int = 0, lines: int = TAIL_LINES) -> str:
        """The last lines the worker printed since ``offset`` (bounded: a 100 MB line is cut)."""
        return read_bounded(self.log_path, offset, lines=lines)


class JudgeFailed(Exception):
    """The judge could not give a verdict (its own failure or the deadline)."""

    def __init__(self, status: str, text: str) -> None:
        super().__init__(text)
        self.status = status


CLOSE_TIMEOUT_S = 10.0


def close_all(handles: list[WorkerHandle | None]) -> None:
    """Ask every child to exit at once, wait for them together, then kill what is left (and
    anything they started). A child's exit tears down its CUDA context, a good part of a
    second; one child after the other, that was added to the end of every run."""
    present = [h for h in handles if h is not None and h.proc is not None]
    asked = [h for h in present if h._ask_to_close()]
    deadline = time.monotonic() + CLOSE_TIMEOUT_S
    for handle in asked:
        try:
            handle.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        mark("engine", f"{handle.role}-exited")
    for handle in present:
        handle.kill()
    mark("engine", "killed")


def _trusted_result(task_id: int, report: dict) -> EvalResult:
    """The worker's own verdict, as before the judge existed (``FIB_TRUSTED_CHECKS=1`` only:
    measuring the judge's cost, never grading)."""
    return EvalResult(task_id, report["status"], report["log"], report["correctness"],
                      report["performance"], report["extra"], report["fatal"])


def with_output_tail(reason: str, tail: str) -> str:
    return f"{reason}\n--- last lines of the worker's output ---\n{tail}" if tail else reason


def trusted_checks() -> bool:
    """``FIB_TRUSTED_CHECKS=1``: the worker checks its own outputs against references it
    computes, as before the judge existed. Only for measuring what the judge costs
    (benchmarks/bench_isolation_overhead.py) and for debugging: a solution can then forge its
    verdict."""
    return os.environ.get("FIB_TRUSTED_CHECKS") == "1"


def default_log_dir() -> Path:
    """A private folder for worker logs (kept until the Benchmark closes, or the process
    exits: a Benchmark never closed leaves nothing behind)."""
    return private_temp_dir("fib-bench-logs-")
