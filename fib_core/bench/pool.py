"""Parent side of a worker: start it, hand it a task, wait with a timeout, kill and replace it.

Every solution call happens in a worker process, so whatever it does (hang, segfault, corrupt
the CUDA context, call ``os._exit``) the engine survives: a hang is killed once no progress was
reported for ``timeout_seconds`` and recorded as TIMEOUT; a dead worker becomes RUNTIME_ERROR
with the last lines it printed. The worker runs in its own session, so killing it also kills
anything it started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing import Pipe
from pathlib import Path
from typing import Any

import fib_core
from fib_core.bench.protocol import EvalResult, EvalTask

TAIL_LINES = 30
STARTUP_TIMEOUT_S = 180.0


class WorkerDied(Exception):
    """The worker ended (or never became ready) without answering."""


class WorkerHandle:
    """One worker process; ``run`` returns an EvalResult whatever the worker does."""

    def __init__(self, device: str, log_dir: Path, *, name: str = "worker") -> None:
        self.requested_device = device
        self.log_path = log_dir / f"{name}-{os.getpid()}-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen | None = None
        self.conn: Any = None
        self.device: str | None = None
        self.env: Any = None

    # --- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        parent, child = Pipe(duplex=True)
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        package_root = str(Path(fib_core.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        if self.requested_device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "fib_core.bench.worker", "--fd", str(child.fileno()),
                 "--device", self.requested_device],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(child.fileno(),), env=env, start_new_session=True,
            )
        finally:
            log.close()
            child.close()
        self.conn = parent
        try:
            message = self._receive(time.monotonic() + timeout)
        except WorkerDied as err:
            self.kill()
            raise WorkerDied(f"the benchmark worker failed to start ({err}):\n{self.tail()}") from None
        if message is None or message[0] != "ready":
            detail = message[1] if message and message[0] == "error" else self.tail()
            self.kill()
            raise WorkerDied(f"the benchmark worker failed to start:\n{detail}")
        self.device = message[1]["device"]
        self.env = message[1]["env"]

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        """Ask the worker to exit; kill it if it does not within a few seconds."""
        if self.proc is None:
            return
        try:
            if self.alive:
                self.conn.send(("close",))
                self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    self.proc.kill()
            self.proc.wait()
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # --- one task --------------------------------------------------------------------------

    def run(self, task: EvalTask, timeout: float,
            on_phase: Callable[[str], None] | None = None) -> EvalResult:
        """Send a task and wait at most ``timeout`` seconds for the whole workload (build,
        inputs, reference, run, timing), as config.toml and the organizers define it."""
        offset = self._log_size()
        try:
            self.conn.send(("eval", task))
        except OSError:
            return self._died(task, offset, "the worker was gone before the task started")
        deadline = time.monotonic() + timeout
        phase = "start"
        while True:
            try:
                message = self._receive(deadline)
            except WorkerDied as err:
                return self._died(task, offset, str(err))
            if message is None:
                self.kill()
                log = (f"timed out after {timeout:g} s for the workload, in phase '{phase}' "
                       "(killed the worker)")
                return EvalResult(task.task_id, "TIMEOUT", _with_tail(log, self.tail(offset)))
            if message[0] == "phase":
                phase = message[2]
                if on_phase is not None:
                    on_phase(phase)
            elif message[0] == "result":
                return message[1]

    def _receive(self, deadline: float) -> tuple | None:
        """Next message, or None at the deadline; WorkerDied if the process ended."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                if self.conn.poll(min(remaining, 0.5)):
                    return self.conn.recv()
            except (EOFError, OSError):
                raise WorkerDied(self._exit_text()) from None
            if self.proc is not None and self.proc.poll() is not None:
                try:
                    if self.conn.poll(0):
                        return self.conn.recv()
                except (EOFError, OSError):
                    pass
                raise WorkerDied(self._exit_text())

    def _died(self, task: EvalTask, offset: int, reason: str) -> EvalResult:
        self.kill()
        return EvalResult(task.task_id, "RUNTIME_ERROR", _with_tail(reason, self.tail(offset)))

    def _exit_text(self) -> str:
        if self.proc is None:
            return "the worker is not running"
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the worker closed its connection"
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
        """The last lines the worker printed since ``offset`` (its stdout and stderr)."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(offset)
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        parts = text.rstrip().splitlines()
        return "\n".join(parts[-lines:])


def _with_tail(reason: str, tail: str) -> str:
    return f"{reason}\n--- last lines of the worker's output ---\n{tail}" if tail else reason


def default_log_dir() -> Path:
    """A private folder for worker logs (kept until the Benchmark closes)."""
    return Path(tempfile.mkdtemp(prefix="fib-bench-logs-"))
