"""The processes of a several-GPU run: one per GPU, each running the engine's one-shard
execution (:func:`fib_core.bench.engine.shard_run.execute`) on the workloads it takes from the
queue the GPUs share.

Each child starts fresh (spawn) with ``CUDA_VISIBLE_DEVICES`` naming its GPU alone, starts its
judge and first worker at once, imports the engine beside them, then waits for its request.
The parent (:class:`ShardProcesses`) forwards the children's progress events, numbered across
GPUs, and collects their results; what a run's GPUs are, and when these processes start, is
:mod:`.gpus`'s.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import queue as queue_module
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from multiprocessing.connection import wait as wait_for_readers
from typing import Any, NoReturn

from fib_core.bench.containment.sandbox import die_with_parent
from fib_core.bench.engine.prestart import discard_early, environment_print, launch_early
from fib_core.bench.engine.shard_run import execute
from fib_core.bench.engine.work_queue import QueuePlan, QueueTaker, WorkQueue
from fib_core.bench.evaluation.timeline import mark
from fib_core.bench.events import (
    SolutionStarted,
    WorkloadFinished,
    WorkloadSkipped,
    WorkloadStarted,
)
from fib_core.errors import FibError
from fib_core.paths import remove_private_dirs

# What a GPU's process runs: the engine's one-shard execution (its judge and worker start
# first, beside the engine's imports), or a stand-in module-level function with the same
# signature (nothing starts early: the tests of the processes themselves).
ShardFunction = Callable[..., Any]


class ShardProcesses:
    """One child process per GPU, each with ``CUDA_VISIBLE_DEVICES`` naming its GPU alone.

    A child starts its judge and first worker at once
    (:func:`fib_core.bench.engine.prestart.launch_early`),
    imports the engine (torch) beside them, then waits for its request. Started by
    :func:`start_early`, before the launcher imports torch, loads its dataset and packs, the
    children boot beside that work instead of after it. A child that gets no request (the run
    ended before it, or took other GPUs) is stopped at once; on Linux a child also stops
    when this process ends, however it ends. A stopped child stops its own judge and worker
    and removes their folder."""

    def __init__(self, device_ids: Sequence[str], device: str, dataset_root: str | None,
                 run_shard: ShardFunction = execute) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.device_ids = list(device_ids)
        self.run_shard = run_shard
        # What the children took from here at start, for run_on_gpus's fit check.
        self.device, self.dataset_root = device, dataset_root
        self.environment = environment_print()
        # One pipe per child for what it reports: a child that dies in the middle of a
        # message spoils its own pipe only (a queue shared by all children has one write
        # lock, which a child killed while holding it keeps from the others for ever).
        pipes = [ctx.Pipe(duplex=False) for _ in self.device_ids]
        self.reports = [reader for reader, _ in pipes]
        self.queue = WorkQueue(ctx, len(self.device_ids))  # filled by run
        # Requests go pickled (see run), so a queue's put does not wait for a child still
        # booting, nor for one that died; nor does this process's exit.
        self.inboxes = [ctx.Queue() for _ in self.device_ids]
        for inbox in self.inboxes:
            inbox.cancel_join_thread()
        self.served = False
        self.procs = [
            ctx.Process(target=_child,
                        args=(dev, QueueTaker(self.queue, index), writer, inbox, device,
                              dataset_root, run_shard, os.getpid()),
                        daemon=False)
            for index, (dev, inbox, (_, writer)) in enumerate(
                zip(self.device_ids, self.inboxes, pipes, strict=True))
        ]
        started = []
        try:
            for proc in self.procs:
                proc.start()
                started.append(proc)
        except BaseException:  # the ones already running would wait for ever
            self.procs = started
            self.close()
            raise
        finally:  # each child has its own copy now: a child's end shows as its pipe's end
            for _, writer in pipes:
                writer.close()

    def fits(self, device_ids: Sequence[str], run_shard: ShardFunction, request: Any) -> bool:
        """Whether these children can run ``request`` on ``device_ids``: the same GPUs, the
        same shard function, and what they took at start (device, dataset, cache folder)
        still true."""
        return (
            self.device_ids == list(device_ids)
            and self.run_shard is run_shard
            and self.device in (request.device, "auto")
            and self.dataset_root == request.dataset_path
            and self.environment == environment_print()
        )

    def standing(self, device_ids: Sequence[str], device: str, dataset_root: str | None,
                 run_shard: ShardFunction) -> bool:
        """Whether these children, started with these settings, still wait unserved and alive
        (a new :func:`prestart` with the same settings then keeps them)."""
        return (
            not self.served
            and self.device_ids == list(device_ids)
            and (self.device, self.dataset_root) == (device, dataset_root)
            and self.run_shard is run_shard
            and self.environment == environment_print()
            and all(proc.is_alive() for proc in self.procs)
        )

    def run(self, plan: QueuePlan, on_event: Callable[[Any], None] | None) -> list[Any]:
        """Fill the queue, hand each child its request; the ShardResults, in shard order."""
        # Pickled here: a request that cannot be sent fails now, not in a queue's thread
        # (which would only print it and leave the children waiting).
        try:
            payloads = [pickle.dumps(request) for request in plan.requests]
            self.queue.fill(plan.lanes)
        except BaseException:
            self.close()
            raise
        self.served = True
        forward = _numbered(on_event)
        for inbox, payload in zip(self.inboxes, payloads, strict=True):
            inbox.put(payload)
        results: list[Any] = []
        errors: list[str] = []
        bugs: list[str] = []
        listening = list(self.reports)  # each child's pipe until it reported or ended
        try:
            while listening:
                ready = wait_for_readers(listening, timeout=1.0)
                if not ready:  # a child that ended may still have its pipe held open by a
                    # process it started: its end counts, not the pipe's
                    ready = [r for r in listening
                             if self.procs[self.reports.index(r)].exitcode is not None]
                for reader in ready:
                    try:
                        if not reader.poll():
                            raise EOFError
                        kind, payload = reader.recv()
                    except Exception:  # it ended (or died mid-message) unreported
                        kind, payload = "error", (
                            f"GPU {self.device_ids[self.reports.index(reader)]}: its process "
                            "ended without a result (see its output above)")
                    if kind == "event":
                        forward(payload)
                        continue
                    listening.remove(reader)
                    if kind == "result":
                        results.append(payload)
                    else:  # the run ends with this: the other GPUs take no further workload
                        self.queue.stop()
                        (bugs if kind == "bug" else errors).append(payload)
        except BaseException:  # this process is leaving (Ctrl-C, a failing event callback):
            # its GPU processes stop now, as unserved ones do (their judges and workers killed,
            # their folders removed), instead of running on until close's deadline
            self.served = False
            raise
        finally:
            mark("launcher", "results")
            self.close(timeout=30)
            mark("launcher", "joined")
        if bugs:
            raise RuntimeError("a GPU process failed:\n" + bugs[0])
        if errors:
            raise FibError(errors[0])
        return sorted(results, key=lambda s: s.shard)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the children. Those that never got a request are stopped at once (they stop
        their judge and worker first); those that did are waited for, ``timeout`` seconds in
        all, then killed."""
        if not self.served:
            for proc in self.procs:
                if proc.is_alive():
                    proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
                proc.join()


def _child(device_id: str, queue: QueueTaker, report: Any, inbox: Any, device: str,
           dataset_root: str | None, run_shard: ShardFunction, parent: int) -> None:
    """Child process: this GPU only; boot, wait for the request, run ``run_shard`` on it (the
    engine's one-shard execution); events and the outcome go to the parent (``parent``)
    through ``report``. SIGTERM (the parent's ``close``, or the parent's death) ends it at
    once: its judge and worker are killed (those of a run it was serving die with it) and its
    folders removed."""
    role = f"gpu{device_id}"
    mark(role, "start")
    _bind_to_gpu(device_id, report, parent)
    try:
        if run_shard is execute:  # the real run: its judge and worker boot while this one
            # imports the engine
            launch_early(device, dataset_root)
            preload_engine()
        mark(role, "imported")
        payload = _wait_for_request(inbox, parent)
        if payload is None:  # no run for this process
            return
        request = pickle.loads(payload)
        mark(role, "request")
        shard = run_shard(request, on_event=lambda event: report.send(("event", event)),
                          queue=queue)
        report.send(("result", shard))
        mark(role, "reported")
        _leave_after_report(report)
    except FibError as err:  # a user mistake: one line, as in a one-GPU run
        report.send(("error", f"GPU {device_id}: {err}"))
    except SystemExit:  # its parent is gone: nobody waits for a report
        raise
    except BaseException:  # a kit bug: its traceback goes to the parent
        import traceback

        report.send(("bug", f"GPU {device_id}:\n{traceback.format_exc()}"))
    finally:  # a multiprocessing child runs no atexit hooks
        discard_early(remove_logs=True)


def _bind_to_gpu(device_id: str, report: Any, parent: int) -> None:
    """Make this process the GPU's: SIGTERM ends it at once (its early judge and worker and
    its private folders go with it), ``CUDA_VISIBLE_DEVICES`` names that GPU alone, and the
    parent's death sends it SIGTERM."""
    def leave(signum: int, frame: Any) -> None:
        # Not an exception: one raised inside an import can be swallowed by the module
        # being imported (seen while torch loads), and the process would go on.
        discard_early(remove_logs=True)
        remove_private_dirs()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, leave)
    # Not passed on to what this process starts: a process outliving it would keep the
    # parent from seeing its end.
    os.set_inheritable(report.fileno(), False)
    os.environ["CUDA_VISIBLE_DEVICES"] = device_id
    # Its inbox holds both ends, so a lost parent would never be seen otherwise.
    die_with_parent(parent, signal.SIGTERM)


def _leave_after_report(report: Any) -> NoReturn:
    """End the process once its result is sent."""
    # Done: its judge and worker are closed. Leave without the interpreter's teardown
    # (torch's, about half a second the launcher would wait for); the result is out.
    report.close()
    discard_early(remove_logs=True)
    remove_private_dirs()
    sys.stdout.flush()  # what it printed reaches a pipe too (os._exit flushes nothing)
    sys.stderr.flush()
    os._exit(0)


def preload_engine() -> None:
    """Import torch and the engine's modules while the request is on its way (CPU work only,
    no CUDA context): the engine imports them lazily, and without this a GPU process paid
    torch's import (1.3 s with two H200s, its judge and worker importing it beside) after its
    request came, while its worker stood ready. ``bench_turnaround.py --watch-idle`` uses it to
    put its launcher where a watch's is after its first run.

    Example: ``preload_engine()`` in a process that will run the engine next."""
    import torch  # noqa: F401

    import fib_core.bench.engine.flow  # noqa: F401
    import fib_core.bench.evaluation.inputs  # noqa: F401


def _wait_for_request(inbox: Any, parent: int) -> bytes | None:
    """The next message of ``inbox``, waited for in short steps: a signal this process gets
    is handled by its main thread only between steps (one that lands on another thread, as
    SIGTERM may, would otherwise wait for a message that never comes), and a parent that is
    gone is seen even where no death signal exists."""
    while True:
        try:
            return inbox.get(timeout=0.2)
        except queue_module.Empty:
            if os.getppid() != parent:
                raise SystemExit(1) from None


def _numbered(on_event: Callable[[Any], None] | None) -> Callable[[Any], None]:
    """``on_event`` for the children's events, numbered across GPUs: each GPU counts its own
    workloads and announces the whole queue, so the run starts once and its workloads count
    1..N in the order they start and end, as on one GPU."""
    counts = {"started": 0, "ended": 0, "announced": 0}

    def forward(event: Any) -> None:
        if on_event is None:
            return
        if isinstance(event, SolutionStarted):
            counts["announced"] += 1
            if counts["announced"] > 1:
                return
        elif isinstance(event, WorkloadStarted):
            event = replace(event, index=counts["started"])
            counts["started"] += 1
        elif isinstance(event, WorkloadFinished | WorkloadSkipped):
            event = replace(event, index=counts["ended"])
            counts["ended"] += 1
        on_event(event)

    return forward
