"""The engine: the one benchmark flow (definitions x solutions x workloads -> traces).

:class:`Engine` runs in the launching process; the public ``fib_core.bench.Benchmark`` is this
class with the organizers' call forms added (:mod:`fib_core.bench.benchmark`). Launchers (the CLI, ``scripts/run_local.py``, a Modal function) stay thin around this class.
Each (solution, workload) pair is evaluated in a worker process: one persistent worker reused
across pairs (default, fast local iteration: builds and caches stay warm), or a fresh worker per
pair (``isolated=True``, how the organizers grade). A worker that hangs, crashes or loses its
CUDA context is replaced and the run goes on. Traces are appended to the dataset as each
workload finishes, so an interrupted run keeps what it measured and ``resume`` skips it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Any

from fib_core.bench.config import BenchmarkConfig
from fib_core.bench.containment.mounts import worker_mounts
from fib_core.bench.containment.source_audit import audit_solution
from fib_core.bench.engine.judge_process import JudgeHandle
from fib_core.bench.engine.pool import (
    WorkerDied,
    WorkerHandle,
    close_all,
    default_log_dir,
    trusted_checks,
)
from fib_core.bench.engine.prestart import take_early
from fib_core.bench.engine.run_lock import ResumeLock, merge_stored_traces
from fib_core.bench.engine.stream import WorkloadStream
from fib_core.bench.engine.trace_sink import TraceSink
from fib_core.bench.engine.traces import finished_pairs, is_finished, make_trace
from fib_core.bench.evaluation.environment import resolve_device
from fib_core.bench.evaluation.judge import expected_output_bytes
from fib_core.bench.evaluation.protocol import EvalResult, EvalTask
from fib_core.bench.evaluation.timeline import mark
from fib_core.bench.events import (
    Log,
    SolutionStarted,
    WorkloadFinished,
    WorkloadSkipped,
    WorkloadStarted,
    emit,
)
from fib_core.data.trace import EvaluationStatus
from fib_core.errors import ConfigError, FibError
from fib_core.paths import remove_private_dir

EventFn = Callable[[Any], None]


def check_filters(trace_set: Any, cfg: BenchmarkConfig, prefix: str = "BenchmarkConfig.") -> None:
    """A name in ``cfg.definitions``/``cfg.solutions`` that ``trace_set`` lacks is most often a
    typo: a ConfigError naming it (and the closest name), not an empty result. ``prefix``
    names the setting as the caller's user wrote it ("--" on the command line)."""
    known = {
        "definitions": list(trace_set.definitions),
        "solutions": [s.name for sols in trace_set.solutions.values() for s in sols],
    }
    for field, names in known.items():
        for name in getattr(cfg, field) or ():
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                if close:
                    hint = f"did you mean {close[0]!r}?"
                else:
                    hint = f"it has {len(names)}: " + ", ".join(sorted(names)[:8]) if names else "it has none"
                raise ConfigError(f"{prefix}{field}: {name!r} is not in the dataset; {hint}")


class Engine:
    """``Benchmark(trace_set, config).run_all()``; use as a context manager or call ``close()``."""

    def __init__(self, trace_set: Any, config: BenchmarkConfig | None = None, *,
                 on_event: EventFn | None = None) -> None:
        if not all(hasattr(trace_set, a) for a in ("definitions", "solutions", "workloads")):
            raise TypeError(
                f"Benchmark: the dataset is a {type(trace_set).__name__}; pass a TraceSet, "
                "e.g. TraceSet.from_path(\"my-dataset\")"
            )
        if config is not None and not isinstance(config, BenchmarkConfig):
            raise TypeError(
                f"Benchmark: the config is a {type(config).__name__}; pass a BenchmarkConfig"
            )
        self.trace_set = trace_set
        self.config = config if config is not None else BenchmarkConfig()
        self.on_event = on_event
        self._log_dir = default_log_dir()
        self._worker: WorkerHandle | None = None
        self._judge: JudgeHandle | None = None
        self._worker_solution = ""
        self._spare: WorkerHandle | None = None  # isolated runs: the next workload's worker
        self._spare_solution = ""
        self._spares_used = 0
        self._audits: dict[str, list[str]] = {}
        self._warned: set[str] = set()
        self._task_id = 0
        self._workers_started = 0

    # --- public API ------------------------------------------------------------------------

    def run_all(self, dump_traces: bool = True, resume: bool = False, *,
                on_event: EventFn | None = None) -> list:
        """Every (definition, solution, workload) in the TraceSet allowed by the config filters
        (a filter naming a definition or solution the dataset lacks is a ConfigError)."""
        traces: list = []
        cfg = self.config
        check_filters(self.trace_set, cfg)
        for def_name in self.trace_set.definitions:
            if cfg.definitions is not None and def_name not in cfg.definitions:
                continue
            for solution in self.trace_set.solutions.get(def_name, []):
                if cfg.solutions is not None and solution.name not in cfg.solutions:
                    continue
                traces += self.run_solution(solution, on_event=on_event, dump_traces=dump_traces,
                                            resume=resume)
        return traces

    def _device_kind(self) -> str:
        """"cuda" or "cpu": what this run measures on (resolved once)."""
        if not hasattr(self, "_kind"):
            self._kind = resolve_device(self.config.device).split(":")[0]
        return self._kind

    def run_solution(self, solution: Any, workloads: Iterable | None = None,
                     progress: EventFn | None = None, *, on_event: EventFn | None = None,
                     dump_traces: bool = False, resume: bool = False) -> list:
        """Evaluate one solution on ``workloads`` (workload records or Workloads; None = all of
        its definition's, filtered by the config). ``progress`` is an alias of ``on_event``.
        With ``dump_traces`` each trace is appended to the dataset as soon as it exists.
        ``workloads`` may be a :class:`fib_core.bench.engine.stream.WorkloadStream` (several GPUs'
        shared queue): each is taken when the previous one is done; ``total`` in the events
        then counts the whole queue's workloads, whoever runs them, ``index`` this run's own."""
        callback = on_event or progress or self.on_event
        self._device_kind()  # fixed from the first run on: its workers live on that device
        definition = self._definition(solution)
        stream = workloads if isinstance(workloads, WorkloadStream) else None
        items = stream if stream is not None else self._workloads(definition.name, workloads)
        total = stream.total if stream is not None else len(items)
        if resume and dump_traces and self.trace_set.root is not None:
            self._lock_resume(definition.name, solution.name, callback)
        done = finished_pairs(self.trace_set, definition.name) if resume else {}
        emit(callback, SolutionStarted(solution.name, definition.name, total))
        for finding in self._audit(solution):
            emit(callback, Log(f"{solution.name}: audit: {finding}", "warning"))
        traces = []
        for index, workload in enumerate(items):
            if resume and is_finished(done, solution, workload.uuid, self._device_kind()):
                emit(callback, WorkloadSkipped(workload.uuid, solution.name, index, total))
                continue
            emit(callback, WorkloadStarted(workload.uuid, index, total, solution.name))
            if stream is not None:
                upcoming = stream.peek()
            else:
                upcoming = items[index + 1] if index + 1 < len(items) else None
            trace = self._run_one(definition, solution, workload, callback,
                                  more=upcoming is not None, upcoming=upcoming)
            if dump_traces:
                self._trace_sink(callback).save([trace])
            traces.append(trace)
            emit(callback, WorkloadFinished(trace, index, total))
        self._unlock_resume()
        return traces

    def close(self, *, kill: bool = False) -> None:
        """Stop the worker and the judge and remove their logs. ``kill``: at once (after
        Ctrl-C, when a busy worker would not answer), instead of asking them to exit."""
        self._unlock_resume()
        mark("engine", "closing")
        if kill:
            for handle in (self._worker, self._judge):
                if handle is not None:
                    handle.kill()
        else:
            close_all([self._worker, self._judge])
        self._worker = self._judge = None
        self._drop_spare()
        mark("engine", "spare-dropped")
        remove_private_dir(self._log_dir)
        mark("engine", "closed")

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.close(kill=exc_type is not None and issubclass(exc_type, KeyboardInterrupt))

    def __del__(self) -> None:  # a forgotten close() must not leave a worker behind
        try:
            for handle in (self._worker, self._judge, self._spare):
                if handle is not None:
                    handle.kill()
        except Exception:
            pass

    # --- internals -------------------------------------------------------------------------

    def _definition(self, solution: Any) -> Any:
        definition = self.trace_set.definitions.get(solution.definition)
        if definition is None:
            known = ", ".join(sorted(self.trace_set.definitions)) or "none"
            raise FibError(
                f"solution {solution.name!r}: definition {solution.definition!r} is not in the "
                f"dataset (it has: {known}); fix `definition` in the solution or the dataset path"
            )
        return definition

    def _workloads(self, def_name: str, workloads: Iterable | None) -> list:
        if workloads is None:
            records = self.trace_set.workloads.get(def_name, [])
            chosen = [r.workload for r in records]
            return [w for w in chosen if self.config.matches_workload(w.uuid)]
        return [getattr(w, "workload", w) for w in workloads]

    def _lock_resume(self, definition: str, solution: str, callback: EventFn | None) -> None:
        """Wait for a concurrent resumed run of this solution, then take in what it stored."""
        self._unlock_resume()
        self._resume_lock = ResumeLock(self.trace_set.root, definition, solution,
                                       on_wait=lambda line: emit(callback, Log(line, "warning")))
        self._resume_lock.acquire()
        merge_stored_traces(self.trace_set, definition)

    def _unlock_resume(self) -> None:
        lock = getattr(self, "_resume_lock", None)
        if lock is not None:
            lock.release()
            self._resume_lock = None

    def _trace_sink(self, callback: EventFn | None) -> TraceSink:
        """Where measured traces go: the dataset, or a named fallback file if it refuses them."""
        if getattr(self, "_sink", None) is None:
            self._sink = TraceSink(self.trace_set)
        self._sink.on_problem = lambda line: emit(callback, Log(line, "warning"))
        return self._sink

    @property
    def save_problems(self) -> list[str]:
        """One line per failure to append traces to the dataset (each names the fallback file)."""
        sink = getattr(self, "_sink", None)
        return list(sink.problems) if sink is not None else []

    def _acquire_worker(self, callback: EventFn | None, solution_hash: str = "") -> WorkerHandle:
        # A worker serves one solution: code left behind in it by one solution (patches,
        # threads, half-written messages) never meets the next one.
        if (self._worker is not None and self._worker.alive
                and self._worker_solution == solution_hash):
            return self._worker
        if self._worker is not None:
            self._worker.kill()
        spare, self._spare = self._spare, None
        worker = None
        if spare is not None and spare.alive and self._spare_solution == solution_hash:
            try:
                spare.wait_ready(timeout=max(120.0, self.config.timeout_seconds))
                worker = spare
                self._spares_used += 1
            except WorkerDied:
                pass
        if worker is None:
            if spare is not None:
                spare.kill()
            worker = self._new_worker(early=self._workers_started == 0, spare=False)
            worker.start(timeout=max(120.0, self.config.timeout_seconds))
            if not self._on_my_device(worker):  # an early one that resolved "auto" otherwise
                worker.kill()
                worker = self._new_worker(spare=False)
                worker.start(timeout=max(120.0, self.config.timeout_seconds))
        self._workers_started += 1
        self._worker = worker
        self._worker_solution = solution_hash
        for note in worker.warnings:
            if note not in self._warned:  # once per run
                self._warned.add(note)
                emit(callback, Log(f"sandbox: {note}", "warning"))
        return worker

    def _new_worker(self, early: bool = False, spare: bool = True) -> WorkerHandle:
        """A worker for this run; with ``early``, the one a launcher started ahead of the run
        (:func:`fib_core.bench.engine.prestart.launch_early`) when it fits. A worker started while no
        other one runs (``spare=False``) makes its CUDA context as it boots; a spare boots
        beside a timed worker, so it waits for its task."""
        mounts = worker_mounts(self.trace_set.root)
        adopted = take_early("worker", self.config.device, mounts,
                             trusted_checks()) if early else None
        return adopted or WorkerHandle(self.config.device, self._log_dir, mounts=mounts,
                                       trusted=trusted_checks(), context_at_start=not spare)

    def _launch_spare(self, solution_hash: str) -> None:
        """Isolated runs: boot the next workload's fresh worker while this one runs.

        The spare only imports (CPU work) and creates its CUDA context when its own task
        arrives, so it does not touch the GPU while another worker is timing; interpreter and
        library start-up (seconds on a GPU machine) leaves the critical path. It serves only
        the solution it was started for: it boots beside that solution's running code, so it
        must never become another solution's worker.
        """
        self._drop_spare()
        spare = self._new_worker()
        spare.launch()
        self._spare, self._spare_solution = spare, solution_hash

    def _drop_spare(self) -> None:
        spare = self._spare
        if spare is not None:
            spare.kill()
        self._spare = None

    def _on_my_device(self, handle: WorkerHandle) -> bool:
        """Whether a started process runs on this run's kind of device."""
        return (handle.device or "").split(":")[0] == self._device_kind()

    def _audit(self, solution: Any) -> list[str]:
        """Static audit findings of a solution's sources (computed once per solution)."""
        key = solution.hash()
        if key not in self._audits:
            self._audits[key] = [str(f) for f in audit_solution(solution)]
        return self._audits[key]

    def _acquire_judge(self, early: bool = True) -> JudgeHandle:
        """The judge process (kit code only; started once, replaced if it fails)."""
        if self._judge is not None and self._judge.alive:
            return self._judge
        if self._judge is not None:
            self._judge.kill()
        judge = take_early("judge", self.config.device) if early else None
        if judge is None:
            judge = JudgeHandle(self.config.device, self._log_dir)
            judge.launch()  # it boots while the worker starts; wait_ready before its first use
        self._judge = judge
        self._judge_booting = True
        return judge

    def _run_one(self, definition: Any, solution: Any, workload: Any,
                 callback: EventFn | None, more: bool = False, upcoming: Any = None) -> Any:
        self._task_id += 1
        task = EvalTask(self._task_id, definition.to_dict(), solution.to_dict(),
                        workload.to_dict(), self.config,
                        str(self.trace_set.root) if self.trace_set.root is not None else None)
        try:
            judge = None if trusted_checks() else self._acquire_judge()
            worker = self._acquire_worker(callback, solution.hash())
            if judge is not None and getattr(self, "_judge_booting", False):
                self._judge_booting = False
                judge.wait_ready(timeout=max(120.0, self.config.timeout_seconds))
                if not self._on_my_device(judge):
                    judge.kill()
                    self._judge = None
                    judge = self._acquire_judge(early=False)
                    self._judge_booting = False
                    judge.wait_ready(timeout=max(120.0, self.config.timeout_seconds))
        except WorkerDied as err:  # its log goes with the run's folder: quote its end instead
            lines = str(err).splitlines()
            raise FibError("\n".join(lines[:1] + lines[1:][-12:])) from None
        if self.config.isolated and more:
            self._launch_spare(solution.hash())

        result = worker.run(task, self.config.timeout_seconds,
                            on_phase=lambda p: emit(callback, Log(f"{solution.name}: {p}", "debug")),
                            judge=judge, n_outputs=len(definition.output_names),
                            max_output_bytes=expected_output_bytes(definition,
                                                                   dict(workload.axes)),
                            upcoming=upcoming.to_dict() if upcoming is not None else None)
        environment = (judge or worker).env.to_environment()
        if self.config.isolated or result.fatal or worker.tainted or not worker.alive:
            if not self.config.isolated:
                emit(callback, Log(f"{solution.name}: {result.status} on workload "
                                   f"{workload.uuid}; replacing the worker", "warning"))
            # Killed, not asked to close: it served its one task, and a graceful exit (CUDA
            # teardown, a solution's leftover threads) can take seconds per workload.
            worker.kill()
            self._worker = None
        if result.status in (EvaluationStatus.TIMEOUT, EvaluationStatus.RUNTIME_ERROR) and not result.extra:
            result = EvalResult(result.task_id, result.status, result.log,
                                extra=self._parent_extra(worker, solution))
        findings = self._audit(solution)
        if findings:  # the trace says the code was flagged, whatever its verdict
            result.extra["audit"] = findings[:20]
        return make_trace(definition, workload, solution, result, environment)

    def _parent_extra(self, worker: WorkerHandle, solution: Any) -> dict:
        """Extras for a result the worker could not write itself (it was killed or died)."""
        kind = (worker.device or "cpu").split(":")[0]
        extra = {"seed": self.config.seed, "device": kind, "solution_hash": solution.hash(),
                 "runner": "isolated" if self.config.isolated else "persistent"}
        if kind != "cuda":
            extra["timing"] = "wall-clock, not comparable"
        return extra
