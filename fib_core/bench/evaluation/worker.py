"""Worker process entry point: ``python -m fib_core.bench.evaluation.worker --fd N --device D``.

Started by :mod:`fib_core.bench.engine.pool` as a fresh interpreter (spawn semantics: no state is
inherited from the parent), with stdout/stderr going to a log file so that even a native crash
leaves its last words for the trace. It talks to the parent over the socket on fd ``N`` in the framing of
:mod:`fib_core.bench.evaluation.wire` (JSON and raw bytes towards the parent, never pickle).

``--role judge`` runs the judge instead (:mod:`fib_core.bench.evaluation.judge`): kit code only, it holds
the reference outputs and decides verdicts; a worker (``--role worker``, the default) runs the
solution inside :func:`fib_core.bench.containment.sandbox.contain`.

The device is settled *before* anything imports Triton: on a machine without a GPU (or with
``--device cpu``) ``TRITON_INTERPRET=1`` is set so Triton kernels run through the interpreter.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from dataclasses import asdict
from typing import Any

from fib_core.bench.containment import sandbox
from fib_core.bench.containment.mounts import parse_mount
from fib_core.bench.evaluation.environment import collect_environment, resolve_device
from fib_core.bench.evaluation.exchange import receive_arena
from fib_core.bench.evaluation.head_start import HeadStart, settle_context, warm_triton
from fib_core.bench.evaluation.logs import clip_text
from fib_core.bench.evaluation.protocol import EvalResult
from fib_core.bench.evaluation.tamper_watch import (
    ProcessState,
    Watched,
    dynamo_import,
    fingerprint,
    tampered,
)
from fib_core.bench.evaluation.timeline import mark, memory_milestone
from fib_core.bench.evaluation.wire import (
    ChildGone,
    payload_bytes,
    recv_message_fds,
    recv_object,
    send_frame,
    socket_from_fd,
)
from fib_core.data.json_io import json_safe
from fib_core.data.trace import EvaluationStatus
from fib_core.paths import cache_dir

# The folder the process started in (the launcher's): where user modules named in
# generator_modules live. Not on sys.path (see child_command.child_pythonpath): only those modules,
# while they are imported, are looked up there first, as `python -m` would have.
_START_DIR = os.getcwd()


def _register_plugins(modules: tuple[str, ...], seen: set[str]) -> None:
    """Import the user modules named in the config (once each), looking in the starting folder
    first; definitions' own generators, checkers and fast references come from the definition
    registry when first needed."""
    for name in modules:
        if name not in seen:
            sys.path.insert(0, _START_DIR)
            try:
                importlib.import_module(name)  # one that fails fails again on the next task
            finally:
                sys.path.remove(_START_DIR)
            seen.add(name)


def _send_result(sock: Any, result: Any, tainted: list[str]) -> None:

    send_frame(sock, {
        "type": "result", "task": result.task_id, "status": result.status,
        "log": clip_text(result.log), "correctness": json_safe(result.correctness),
        "performance": json_safe(result.performance), "extra": json_safe(result.extra),
        "fatal": bool(result.fatal), "tainted": bool(tainted),
    })


def serve(sock: Any, requested_device: str, warnings: list[str], trusted: bool = False,
          ahead: HeadStart | None = None) -> int:
    """Answer tasks until told to close (0) or the GPU context is lost (3). ``ahead``: what
    :meth:`HeadStart.begin` started; without a context thread there the CUDA context is made
    when the first task arrives."""
    device = resolve_device(requested_device)
    mark("worker", "torch")
    if not device.startswith("cuda"):
        os.environ["TRITON_INTERPRET"] = "1"
    ahead = ahead or HeadStart.begin(requested_device, context=False)
    env = collect_environment(device, ahead.smi)
    send_frame(sock, {"type": "ready", "device": device, "env": asdict(env), "warnings": warnings})
    mark("worker", "ready")
    current = {"task": -1, "first": -1}
    evaluator = _worker_evaluator(sock, device, env, current, trusted)
    plugins: set[str] = set()
    if device.startswith("cuda"):
        warm_triton(sock)
    state: ProcessState | None = None
    baseline: Watched | None = None
    checker = evaluator.remote_check
    while True:
        try:
            message, _, fds = recv_message_fds(sock)
        except (ChildGone, EOFError, OSError):
            return 0  # the parent went away
        if message[0] == "close":
            mark("worker", "close")
            evaluator.close()
            return _leave("worker")
        if message[0] == "arena":  # where this worker's outputs go from now on
            _take_arena(message, fds, checker)
            continue
        task = message[1]
        current["task"] = task.task_id
        if state is None:
            current["first"] = task.task_id
            state = _first_task(device, ahead)
        try:
            _register_plugins(task.config.generator_modules, plugins)
            if baseline is None:
                baseline = fingerprint()
                mark("worker", "baseline")
            result = evaluator.evaluate(task)
        except Exception:  # a kit bug or a plugin import error: report it, keep serving
            result = EvalResult(task.task_id, EvaluationStatus.RUNTIME_ERROR,
                                "internal error in the benchmark worker:\n" + traceback.format_exc())
        tainted = _after_task(result, state, baseline)
        _send_result(sock, result, tainted)
        if task.task_id == current["first"]:
            mark("worker", "task1-sent")
        if result.fatal or tainted:
            return 3


def serve_judge(sock: Any, requested_device: str, ahead: HeadStart | None = None) -> int:
    """The judge's loop: checks and reference latencies for the parent, nothing else.
    ``ahead``: what :meth:`HeadStart.begin` started (its context thread included)."""
    device = resolve_device(requested_device)
    mark("judge", "torch")
    if not device.startswith("cuda"):
        os.environ["TRITON_INTERPRET"] = "1"
    # Imported once the device is settled (TRITON_INTERPRET set before anything may import
    # Triton) and while torch imports on the head start's thread: about 90 ms.
    from fib_core.bench.evaluation.evaluator import Evaluator
    from fib_core.bench.evaluation.judge import JudgeServer

    ahead = ahead or HeadStart.begin(requested_device, context=True)
    env = collect_environment(device, ahead.smi)
    send_frame(sock, {"type": "ready", "device": device, "env": asdict(env), "warnings": []})
    mark("judge", "ready")
    # The judge's context now (it is never a spare), made in the thread ``ahead`` started:
    # its reads then page-lock memory in threads that find the context made
    # (integrity.PinnedPool).
    settle_context(device, ahead.context)
    judge = JudgeServer(Evaluator(device, env))
    plugins: set[str] = set()
    task = None  # sent once per task; later messages carry None
    arena = None  # the current worker's shared output buffer (fib_core.bench.evaluation.exchange)
    while True:
        try:
            message, blob, fds = recv_message_fds(sock)
        except (ChildGone, EOFError, OSError):
            judge.evaluator.ref_cache.close()  # the parent went away
            return 0
        kind = message[0]
        if kind == "close":  # every reference store finished before its check was answered
            mark("judge", "close")
            judge.evaluator.ref_cache.close()
            return _leave("judge")
        if kind == "arena":  # a check naming another buffer is then the judge's failure
            arena = receive_arena(message, fds, arena)
            continue
        if kind == "forget":
            judge.forget()
            task = None
            continue
        if kind == "next":  # the workload after the announced task; no reply is expected
            _head_start(judge.announce_next, message[1])
            continue
        if kind == "task":  # a task started in the worker; no reply is expected
            if message[1] is not None:
                task = message[1]
                _head_start(_announce, judge, task, plugins)
            continue
        task = message[1] if message[1] is not None else task
        send_frame(sock, _judge_reply(judge, task, message, blob, arena, plugins))


def _worker_evaluator(sock: Any, device: str, env: Any, current: dict, trusted: bool) -> Any:
    """The worker's evaluator, its phases and checks going to the parent over ``sock``
    (``current``: the task being served, and the first one, whose phases go on the
    timeline)."""
    # Imported here, after the device is settled (see serve_judge): about 90 ms.
    from fib_core.bench.evaluation.evaluator import Evaluator
    from fib_core.bench.evaluation.judge import RemoteChecker

    def phase(name: str) -> None:
        send_frame(sock, {"type": "phase", "task": current["task"], "name": name})
        if current["task"] == current["first"]:  # the first task's phases, on the timeline
            mark("worker", name)

    def send_check(header: dict, blob: Any) -> None:
        header["task"] = current["task"]
        send_frame(sock, header, blob)

    def receive_verdict() -> dict:
        return recv_object(sock)[1]

    evaluator = Evaluator(device, env, phase=phase)
    if not trusted:  # the trusted mode exists to measure what the judge costs
        evaluator.remote_check = RemoteChecker(send_check, receive_verdict)
    return evaluator


def _first_task(device: str, ahead: HeadStart) -> ProcessState:
    """At the first task, not at start-up (a spare booting beside a timed worker must not touch
    the GPU): the CUDA context, and the process state restored after every task."""
    mark("worker", "task1")
    settle_context(device, ahead.context)
    mark("worker", "context")
    return ProcessState()


def _take_arena(message: tuple, fds: list[int], checker: Any) -> None:
    """Where the worker's outputs go from now on: the shared buffer the parent sent (or
    none); a trusted worker, which sends no outputs, closes it."""
    arena = receive_arena(message, fds, checker.arena if checker else None)
    if checker is not None:
        checker.arena = arena
    elif arena is not None:
        arena.close()


def _after_task(result: Any, state: ProcessState, baseline: Watched | None) -> list[str]:
    """What the solution changed in this process: its working directory, environment and
    import path are restored (and noted); the harness or torch functions it patched are
    returned (noted too: the worker is then replaced). What it printed is flushed first, to
    the log the parent reads."""
    sys.stdout.flush()
    sys.stderr.flush()
    changed = state.restore()
    tainted = tampered(baseline or Watched())
    if baseline is not None and dynamo_import(baseline, tainted):
        tainted = []
    if changed or tainted:
        notes = result.extra.setdefault("warnings", [])
        if changed:
            notes.append("the solution changed the worker's " + ", ".join(changed)
                         + " (restored)")
        if tainted:
            notes.append("the solution patched harness or torch functions ("
                         + ", ".join(tainted[:5]) + "); the worker is replaced")
    return tainted


def _head_start(work: Any, *args: Any) -> None:
    """Work the judge does ahead of a check; a failure is printed, and the check that needs
    the work does it anyway."""
    try:
        work(*args)
    except Exception:
        traceback.print_exc()


def _announce(judge: Any, task: Any, plugins: set[str]) -> None:
    _register_plugins(task.config.generator_modules, plugins)
    judge.announce(task)


def _judge_reply(judge: Any, task: Any, message: tuple, blob: Any, arena: Any,
                 plugins: set[str]) -> dict:
    """The judge's answer to a check or reference-latency request of ``task``; a failure is
    the judge's own (``failed``), never the solution's."""
    kind = message[0]
    try:
        if task is None:
            raise RuntimeError(f"a {kind!r} request before its task")
        _register_plugins(task.config.generator_modules, plugins)
        if kind != "check":
            return {"type": "latency", **judge.reference_latency(task, message[2])}
        set_index, n_sets, specs, slot = message[2:6]
        if slot is not None:  # the parent checked the slot and the sizes
            if arena is None or arena.arena_id != slot[0]:
                raise RuntimeError("a check names a shared buffer the judge does not have")
            arena.pin()  # page-locked once this process has its CUDA context
            blob = arena.region(slot[1], payload_bytes(specs))
        return {"type": "verdict", **judge.check(task, set_index, n_sets, specs, blob)}
    except Exception:
        return {"type": "failed", "message": traceback.format_exc()[-4000:]}


def _leave(role: str) -> int:
    """Exit at once when the parent says ``close``: the interpreter's orderly teardown of torch
    and the CUDA context took 0.6-1.0 s against 0.12 s for ``os._exit`` (measured on an
    H100), at the end of every run. Under a profiler (measuring the harness) the normal exit
    stays, so the profile is written."""
    if _profiled():
        return 0
    mark(role, memory_milestone("leave"))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


def _profiled() -> bool:
    """Whether a profiler watches this process (``sys.setprofile``, or from Python 3.12 on
    ``sys.monitoring``, which cProfile uses there)."""
    if sys.getprofile() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)
    return monitoring is not None and monitoring.get_tool(monitoring.PROFILER_ID) is not None


def _hidden_references(trusted: bool) -> list[tuple[str, str]]:
    """The reference cache, hidden from a worker whose outputs a judge checks: only the judge
    reads references, and a solution must not load the outputs cached there (read-only is not
    enough). A trusted worker computes its own references, through that cache."""
    if trusted:
        return []

    folder = cache_dir() / "reference"
    return [("hide", str(folder.resolve()))] if folder.is_dir() else []


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--role", choices=("worker", "judge"), default="worker")
    parser.add_argument("--mount", action="append", default=[], type=parse_mount,
                        help="kind:folder, in order (fib_core.bench.containment.mounts.Mounts)")
    parser.add_argument("--trusted", action="store_true")
    parser.add_argument("--context-at-start", action="store_true")
    parser.add_argument("--parent", type=int, help="the launching process's pid")
    args = parser.parse_args(argv)

    mark(args.role, "start")  # before the sandbox: the timeline's file is open from here on
    sandbox.die_with_parent(args.parent)  # also when it ended while this one started
    warnings: list[str] = []
    if args.role == "judge":
        sandbox.forbid_tracing()
    else:
        warnings = sandbox.contain([*args.mount, *_hidden_references(args.trusted)])

    sock = socket_from_fd(args.fd)
    try:
        # Before torch is imported, which the two then overlap; a spare worker (no
        # --context-at-start) must not touch the GPU while another is timed.
        ahead = HeadStart.begin(args.device, args.role == "judge" or args.context_at_start)
        if args.role == "judge":
            return serve_judge(sock, args.device, ahead)
        return serve(sock, args.device, warnings, args.trusted, ahead)
    except Exception:
        traceback.print_exc()
        try:
            send_frame(sock, {"type": "error", "text": traceback.format_exc()[-4000:]})
        except OSError:
            pass
        return 2


if __name__ == "__main__":
    sys.exit(main())
