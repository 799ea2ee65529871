"""Several GPUs for one run: one process per GPU, taking workloads from one shared queue.

``run_local.py`` uses every visible GPU (``--gpus 0,1`` or ``--gpus 1`` to choose). Each GPU
gets its own child process, started fresh (spawn) with ``CUDA_VISIBLE_DEVICES`` naming that
GPU alone, and runs the function the launcher names (the kit's run_local names
``fib_core.project.runflow:execute``, the usual one-GPU run), taking its workloads
one at a time from a queue the GPUs share (:mod:`fib_core.bench.engine.work_queue`: size order, one
GPU from each end), each with its own persistent worker and its own build and reference caches
in memory (the disk caches are shared; their writes are atomic). The parent forwards the
children's progress events, numbered across GPUs, and merges their traces in the selection's
order, so the table reads as a one-GPU run's. A launcher calls :func:`start_early` first, so
that these processes (or, on one GPU, the run's judge and first worker) boot while it imports
torch, loads the dataset and packs.

The engine imports nothing of the launcher: the function each GPU's process runs comes by
name, ``"module:function"``, imported in that process once its judge and worker are booting.

Example (the plan; ``run_on_gpus(plan_queue(request, selection, 2), physical_ids([0, 1]),
target="fib_core.project.runflow:execute")`` then runs it):

>>> parse_gpus("0,1", visible=2)
[0, 1]
>>> physical_ids([1], {"CUDA_VISIBLE_DEVICES": "4,5"})
['5']
"""

from __future__ import annotations

import os
import queue as queue_module
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import wait as wait_for_readers
from pathlib import Path
from typing import Any

from fib_core.bench.engine.prestart import discard_early, environment_print, launch_early
from fib_core.bench.engine.work_queue import QueueTaker, WorkQueue, queue_plan
from fib_core.bench.evaluation.timeline import mark
from fib_core.errors import ConfigError, FibError

# What a GPU's process runs: "module:function" (a real run: its judge and worker start first,
# then the function is imported), or a module-level function (nothing starts early: tests).
Target = Callable[..., Any] | str

# A workload's cost, for cutting the queue into lanes of near-equal work: a fixed part (worker
# round trip, inputs, checks) plus a part that grows with its roofline size (kernels,
# reference, transfers). Only a guess: the GPUs of a lane meet wherever its work splits.
FIXED_SHARE = 1.0
SIZE_SHARE = 10.0


def parse_gpus(text: str | None, visible: int) -> list[int]:
    """GPU indices from ``--gpus`` ("0,1", "1", "all"; None = all visible), checked."""
    if visible < 1:
        raise ConfigError("--gpus: torch sees no CUDA GPU here; drop --gpus (a CPU run uses none)")
    if text is None or text.strip().lower() == "all":
        return list(range(visible))
    chosen: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit():
            raise ConfigError(f"--gpus {text}: {part!r} is not a GPU index; use e.g. --gpus 0,1")
        index = int(part)
        if index >= visible:
            raise ConfigError(
                f"--gpus {text}: GPU {index} does not exist; this machine shows {visible} "
                f"(0..{visible - 1})"
            )
        if index not in chosen:
            chosen.append(index)
    if not chosen:
        raise ConfigError(f"--gpus {text!r}: name at least one GPU index, e.g. --gpus 0")
    return chosen


def workload_costs(definition: str, axes_list: Sequence[dict[str, int]]) -> list[float]:
    """Relative cost of each workload (equal when the definition has no model)."""
    from fib_core.dataset.roofline import workload_cost

    try:
        sizes = []
        for axes in axes_list:
            cost = workload_cost(definition, axes)
            sizes.append(float(cost.bytes + cost.flops))
    except KeyError:
        return [FIXED_SHARE] * len(axes_list)
    top = max(sizes, default=0.0) or 1.0
    return [FIXED_SHARE + SIZE_SHARE * s / top for s in sizes]


def physical_ids(gpus: Sequence[int], env: dict[str, str] | None = None) -> list[str]:
    """What each chosen index means in ``CUDA_VISIBLE_DEVICES`` for a child: the parent's own
    list entry when it has one (indices count within what the parent sees)."""
    from fib_core.bench.evaluation.environment import visible_entries

    listed = visible_entries(os.environ if env is None else env) or []
    return [listed[g] if g < len(listed) else str(g) for g in gpus]


@dataclass
class QueuePlan:
    """A run on several GPUs: one request per GPU (each holding the queue's order, as
    positions in the run's selection) and the queue's lanes
    (:func:`fib_core.bench.engine.work_queue.queue_plan`)."""

    requests: list[Any]
    lanes: list[tuple[int, int]]


def plan_queue(request: Any, selection: Sequence[Any], gpus: int) -> QueuePlan:
    """The plan for ``request`` on ``gpus`` GPUs: ``selection`` (its workload records) in the
    queue's size order, lanes of near-equal cost by :func:`workload_costs`."""
    axes = [dict(t.workload.axes) for t in selection]
    order, lanes = queue_plan(workload_costs(request.definition, axes), axes, gpus)
    requests = [replace(request, shard=i, num_shards=gpus, queue=order) for i in range(gpus)]
    return QueuePlan(requests, lanes)


def visible_gpu_count() -> int | None:
    """How many GPUs torch will see, read without importing torch; None when that cannot be
    told (no NVIDIA driver folder, or a torch built without CUDA). A launcher uses it to
    start one process per GPU before its own torch import; torch's count still decides the
    run, and processes started for GPUs it does not use are stopped.

    ``CUDA_VISIBLE_DEVICES`` is read as CUDA reads it
    (:func:`fib_core.bench.evaluation.environment.visible_entries`), up to the driver's own count."""
    from fib_core.bench.evaluation.environment import visible_entries

    if not _torch_has_cuda():
        return None
    installed = _installed_gpus()
    listed = visible_entries(os.environ)
    if listed is None:
        return installed
    return len(listed) if installed is None else min(len(listed), installed)


def _installed_gpus() -> int | None:
    """The NVIDIA driver's count of this machine's GPUs (Linux), None without a driver."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return None


def _torch_has_cuda() -> bool:
    """Whether the installed torch was built with CUDA, read from its ``version.py`` without
    importing it (a CPU build on a GPU machine runs on the CPU: no GPU processes then)."""
    import re

    from fib_core.paths import torch_package_dir

    folder = torch_package_dir()
    try:
        text = (folder / "version.py").read_text(encoding="utf-8") if folder else ""
    except OSError:
        return True  # unknown: torch decides later
    return re.search(r"^cuda\b[^=\n]*=\s*None\s*$", text, re.MULTILINE) is None


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
                 target: Target) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.device_ids = list(device_ids)
        self.target = target
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
                              dataset_root, target, os.getpid()),
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

    def fits(self, device_ids: Sequence[str], target: Target, request: Any) -> bool:
        """Whether these children can run ``request`` on ``device_ids``: the same GPUs, the
        same target, and what they took at start (device, dataset, cache folder) still true."""
        return (
            self.device_ids == list(device_ids)
            and self.target == target
            and self.device in (request.device, "auto")
            and self.dataset_root == request.dataset_path
            and self.environment == environment_print()
        )

    def standing(self, device_ids: Sequence[str], device: str, dataset_root: str | None,
                 target: Target) -> bool:
        """Whether these children, started with these settings, still wait unserved and alive
        (a new :func:`prestart` with the same settings then keeps them)."""
        return (
            not self.served
            and self.device_ids == list(device_ids)
            and (self.device, self.dataset_root, self.target) == (device, dataset_root, target)
            and self.environment == environment_print()
            and all(proc.is_alive() for proc in self.procs)
        )

    def run(self, plan: QueuePlan, on_event: Callable[[Any], None] | None) -> list[Any]:
        """Fill the queue, hand each child its request; the ShardResults, in shard order."""
        import pickle

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
        import time

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


_prestarted: ShardProcesses | None = None
_exit_hook_registered = False


def start_early(device: str | None, gpus: str | None, dataset_root: str | Path | None,
                target: str) -> None:
    """What a launcher calls first, before it imports torch: the processes of the run it is
    about to make start booting now (seconds: interpreter, torch, CUDA context), side by side
    with its own imports, dataset and packing.

    Several GPUs (``gpus`` lists more than one, or none is named and more than one is
    visible): one :class:`ShardProcesses` child per GPU, which :func:`run_on_gpus` uses when
    the run's GPUs and settings are these. Otherwise, one GPU or unknown: the judge and first
    worker of a one-GPU run (:func:`fib_core.bench.engine.prestart.launch_early`).
    ``device``: the
    ``--device`` flag (None = auto); "cpu" starts only the CPU run's processes; ``target``:
    what each GPU's process will run, ``"module:function"`` (see :func:`run_on_gpus`).

    Example: ``start_early(None, "0,1", "/path/to/dataset", "fib_core.project.runflow:execute")``
    at the top of a launcher's main.
    """

    mark("launcher", "start_early")
    ids = None if device == "cpu" else _early_device_ids(gpus)
    root = None if dataset_root is None else str(dataset_root)
    if ids is None:
        discard_prestarted()
        launch_early(device or "auto", root)
        return
    prestart(physical_ids(ids), device or "auto", root, target)


def prestart(device_ids: Sequence[str], device: str, dataset_root: str | None,
             target: Target) -> None:
    """Start one :class:`ShardProcesses` child per GPU of ``device_ids`` for the next
    :func:`run_on_gpus` on those GPUs (``target``: what they run, as there), in place of any
    started before with other settings (those started with the same ones and still waiting
    are kept); stopped at exit if no run takes them."""
    global _prestarted, _exit_hook_registered
    if _prestarted is not None and _prestarted.standing(device_ids, device, dataset_root, target):
        return  # the last prestart's, unused and alive (a watch after a run that failed early)
    discard_prestarted()
    if not _exit_hook_registered:
        import atexit
        import multiprocessing.util  # noqa: F401  its exit hook (which waits for children)
        # is registered now, so this one, registered after it, runs before it
        atexit.register(discard_prestarted)
        _exit_hook_registered = True
    _prestarted = ShardProcesses(device_ids, device, dataset_root, target)


def _early_device_ids(gpus: str | None) -> list[int] | None:
    """The GPU indices a run on ``gpus`` will use, read without torch; None when it will be a
    one-GPU run in this process, or when it cannot be told yet."""
    visible = visible_gpu_count()
    if not visible:
        return None
    try:
        chosen = parse_gpus(gpus, visible)
    except ConfigError:  # the run itself says what is wrong, in one line
        return None
    if len(chosen) == 1 and gpus is None:
        return None
    return chosen


def discard_prestarted() -> None:
    """Stop the prestarted GPU processes that no run took."""
    global _prestarted
    shards, _prestarted = _prestarted, None
    if shards is not None:
        shards.close()


def _child(device_id: str, queue: QueueTaker, report: Any, inbox: Any, device: str,
           dataset_root: str | None, target: Target, parent: int) -> None:
    """Child process: this GPU only; boot, wait for the request, run the usual shard
    execution; events and the outcome go to the parent (``parent``) through ``report``. SIGTERM (the parent's ``close``, or the
    parent's death) ends it at once: its judge and worker are killed (those of a run it was
    serving die with it) and its folders removed."""
    import pickle
    import signal
    import sys

    from fib_core.bench.containment.sandbox import die_with_parent
    from fib_core.paths import remove_private_dirs

    role = f"gpu{device_id}"
    mark(role, "start")

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
    try:
        if isinstance(target, str):  # the real run: its judge and worker boot while this
            # one imports
            launch_early(device, dataset_root)
            target = _named(target)
            preload_engine()
        mark(role, "imported")
        payload = _wait_for_request(inbox, parent)
        if payload is None:  # no run for this process
            return
        request = pickle.loads(payload)
        mark(role, "request")
        shard = target(request, on_event=lambda event: report.send(("event", event)),
                       queue=queue)
        report.send(("result", shard))
        mark(role, "reported")
        # Done: its judge and worker are closed. Leave without the interpreter's teardown
        # (torch's, about half a second the launcher would wait for); the result is out.
        report.close()
        discard_early(remove_logs=True)
        remove_private_dirs()
        sys.stdout.flush()  # what it printed reaches a pipe too (os._exit flushes nothing)
        sys.stderr.flush()
        os._exit(0)
    except FibError as err:  # a user mistake: one line, as in a one-GPU run
        report.send(("error", f"GPU {device_id}: {err}"))
    except SystemExit:  # its parent is gone: nobody waits for a report
        raise
    except BaseException:  # a kit bug: its traceback goes to the parent
        import traceback

        report.send(("bug", f"GPU {device_id}:\n{traceback.format_exc()}"))
    finally:  # a multiprocessing child runs no atexit hooks
        discard_early(remove_logs=True)


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


def _named(target: str) -> Callable[..., Any]:
    """The function ``"module:function"`` names, imported (a GPU process's run)."""
    import importlib

    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


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


def run_on_gpus(
    plan: QueuePlan,
    device_ids: Sequence[str],
    on_event: Callable[[Any], None] | None = None,
    *,
    target: Target,
) -> list[Any]:
    """Run ``plan`` with one process per GPU of ``device_ids`` (one per request, in order);
    the ShardResults, in shard order.

    The processes :func:`start_early` prestarted serve when :meth:`ShardProcesses.fits` says
    so (same GPUs, target, device, dataset and cache folder), else they are stopped and new
    ones start. ``target(request, on_event=..., queue=...)`` is what each child runs
    (``queue``: that GPU's :class:`QueueTaker`): named ``"module:function"``, imported in the
    child after its judge and worker started booting; or a module-level function, with nothing
    started early (tests)."""
    global _prestarted
    if len(plan.requests) != len(device_ids):
        raise ValueError(f"{len(plan.requests)} requests for {len(device_ids)} GPUs")
    first = plan.requests[0]
    shards = _prestarted if _prestarted is not None and \
        _prestarted.fits(device_ids, target, first) else None
    if shards is not None:
        _prestarted = None
    discard_prestarted()
    if shards is None:
        shards = ShardProcesses(device_ids, first.device or "auto", first.dataset_path, target)
    return shards.run(plan, on_event)


def _numbered(on_event: Callable[[Any], None] | None) -> Callable[[Any], None]:
    """``on_event`` for the children's events, numbered across GPUs: each GPU counts its own
    workloads and announces the whole queue, so the run starts once and its workloads count
    1..N in the order they start and end, as on one GPU."""
    from fib_core.bench.events import (
        SolutionStarted,
        WorkloadFinished,
        WorkloadSkipped,
        WorkloadStarted,
    )

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
