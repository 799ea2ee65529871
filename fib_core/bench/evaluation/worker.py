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
import ctypes
import importlib
import os
import sys
import threading
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fib_core.bench.evaluation.timeline import mark, memory_milestone
from fib_core.data.trace import EvaluationStatus


def resolve_device(requested: str) -> str:
    """'auto' -> 'cuda:0' when a GPU is visible, else 'cpu'; 'cuda' -> 'cuda:0'.

    GPUs are counted as ``torch.cuda.device_count`` counts them (through NVML, where torch
    can), not with ``is_available``, which starts the CUDA driver: 0.46 s against 0.03 s
    with two H200s, paid by every launcher before it hands its run over, though only the
    judge and the worker make CUDA contexts (a driver that fails then fails there, and
    says so)."""
    import torch

    def visible() -> bool:
        return torch.backends.cuda.is_built() and torch.cuda.device_count() > 0

    if requested == "auto":
        requested = "cuda" if visible() else "cpu"
    if requested == "cuda":
        if not visible():
            from fib_core.errors import ConfigError

            raise ConfigError("--device cuda was asked for, but torch sees no CUDA GPU here")
        return "cuda:0"
    return requested


# The folder the process started in (the launcher's): where user modules named in
# generator_modules live. Not on sys.path (see pool.WorkerHandle.launch): only those modules,
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


Entry = tuple[str, Any, str, Any]  # (name, namespace, attribute, object at the baseline)


@dataclass
class Watched:
    """What :func:`_fingerprint` saw: entries of mappings (module dicts, class mappingproxies,
    ``sys.modules``) and of functions (their code and defaults), kept apart so the check
    after each task is two plain comprehensions."""

    mappings: list[Entry] = field(default_factory=list)
    functions: list[Entry] = field(default_factory=list)
    dynamo_loaded: bool = False  # whether torch._dynamo was imported when this was taken
    # The code object and globals of torch's own dynamo wrapper, learnt when the baseline was
    # taken (not after a task, when the solution may have changed what makes it).
    dynamo_wrapper: tuple[Any, dict] | None = None


def _fingerprint() -> Watched:
    """The functions and classes of the kit and of torch's key modules, as objects: a solution
    that rebound any of them (or swapped a function's code) leaves this worker unfit for the
    next solution.

    Taken once, at the first task; each namespace is kept as a live view (a module's dict, a
    class's mappingproxy, ``sys.modules``), so the check after every task (:func:`_tampered`)
    is a pass over the same entries, not a new walk of every module (that cost about 25 ms
    per workload). Objects, not ids, are kept: an id can be reused by a new object."""
    watched = Watched(dynamo_loaded="torch._dynamo" in sys.modules)
    torch = sys.modules.get("torch")
    if torch is not None and not watched.dynamo_loaded:
        try:
            probe = torch._disable_dynamo(_dynamo_probe)
            watched.dynamo_wrapper = (probe.__code__, probe.__globals__)
        except Exception:  # a torch without that helper: its import is not taken in
            pass
    entries = watched.mappings
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "fib_core" or name.startswith("fib_core.")
                                  or name in _WATCHED_TORCH):
            continue
        entries.append((f"sys.modules[{name!r}]", sys.modules, name, module))
        namespace = vars(module)
        for attr, value in list(namespace.items()):
            if callable(value):
                entries.append((f"{name}.{attr}", namespace, attr, value))
                _watch_code(watched, f"{name}.{attr}", value)
                if isinstance(value, type) and getattr(value, "__module__", "") == name:
                    members = vars(value)
                    for member, fn in list(members.items()):
                        if callable(fn):
                            entries.append((f"{name}.{attr}.{member}", members, member, fn))
                            _watch_code(watched, f"{name}.{attr}.{member}", fn)
    tensor = sys.modules.get("torch")
    if tensor is not None:
        members = vars(tensor.Tensor)
        for member, fn in list(members.items()):
            if callable(fn):
                entries.append((f"torch.Tensor.{member}", members, member, fn))
    return watched


def _watch_code(watched: Watched, name: str, fn: Any) -> None:
    """A Python function's code and defaults can be swapped in place, the object kept."""
    if isinstance(fn, types.FunctionType):
        for attr in ("__code__", "__defaults__", "__kwdefaults__"):
            watched.functions.append((f"{name}.{attr}", fn, attr, getattr(fn, attr)))


_WATCHED_TORCH = ("torch", "torch.cuda", "torch.profiler", "torch.testing", "torch.autograd.profiler",
                  "torch.nn.functional", "torch.utils.benchmark", "triton", "triton.testing")


def _dynamo_import(baseline: Watched, changed: list[str]) -> bool:
    """Whether ``changed`` is exactly what importing ``torch._dynamo`` does on its own, and the
    baseline now takes that in (True) instead of the worker being replaced.

    That import (``torch.compile``, ``torch.library.triton_op`` and ``torch.profiler``'s start
    reach it) rebinds ``torch.manual_seed`` to a wrapper that ``torch._disable_dynamo`` makes
    around the original. The worker no longer imports it at start (about 1 s before every
    worker's first workload), so a solution that imports it would otherwise read as tampering
    and cost a new worker per workload. Accepted only when dynamo was absent at the baseline
    and is loaded now, ``torch.manual_seed`` is the only name changed, and the new object is
    torch's own wrapper (the code object and globals ``torch._disable_dynamo`` gave when the
    baseline was taken) holding the baseline's function; its closure is watched from then on.
    Anything else stays tampering. What the wrapper calls on (``torch._dynamo.disable``, an
    attribute dynamo caches on the original) is not watched: the kit never calls
    ``torch.manual_seed`` in a worker (its inputs come from seeded generators)."""
    torch = sys.modules.get("torch")
    if baseline.dynamo_loaded or baseline.dynamo_wrapper is None or torch is None \
            or "torch._dynamo" not in sys.modules or changed != ["torch.manual_seed"]:
        return False
    entry = next((e for e in baseline.mappings if e[0] == "torch.manual_seed"), None)
    wrapper = getattr(torch, "manual_seed", None)
    if entry is None or type(wrapper) is not types.FunctionType:
        return False
    code, namespace = baseline.dynamo_wrapper
    if wrapper.__code__ is not code or wrapper.__globals__ is not namespace \
            or code.co_freevars != ("fn", "recursive"):
        return False
    try:
        cells = dict(zip(code.co_freevars, wrapper.__closure__ or (), strict=True))
        if cells["fn"].cell_contents is not entry[3]:
            return False
    except (ValueError, KeyError):  # an empty cell, or not two of them: not dynamo's doing
        return False
    index = baseline.mappings.index(entry)
    baseline.mappings[index] = (entry[0], entry[1], entry[2], wrapper)
    _watch_code(baseline, entry[0], wrapper)
    for name, cell in cells.items():  # what the wrapper calls stays what it is now
        baseline.functions.append((f"{entry[0]}.<{name}>", cell, "cell_contents",
                                   cell.cell_contents))
    baseline.dynamo_loaded = True
    return True


def _dynamo_probe() -> None:
    """What :func:`_fingerprint` has ``torch._disable_dynamo`` wrap, to learn its code."""


def _settle_environment() -> None:
    """Set ``CUDA_MODULE_LOADING`` to lazy (unless set), and ``TORCHINDUCTOR_CACHE_DIR``
    to the folder torch would choose (in this worker's
    private temporary folder), unless it is set: torch sets it the first time its compiler's
    cache folder is asked for, which importing ``torch._dynamo`` does, and the worker no longer
    does that before its baseline. A solution importing it would otherwise read as changing the
    worker's environment (what ``torch.compile`` sets when it compiles still does). The folder
    is torch's rule, not asked of torch: asking imports the compiler (about 1 s)."""
    import getpass
    import re
    import tempfile

    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}"
    name = "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(tempfile.gettempdir(), name))
    # Lazy module loading: the driver's default since CUDA 12.2, and what torch versions that
    # set anything set before they start the driver. Set here because the driver may now start
    # before torch is imported (:func:`_open_context_early`), and reads it once, at its start.
    os.environ.setdefault("CUDA_MODULE_LOADING", "LAZY")


def _open_context_early(requested: str) -> threading.Thread | None:
    """Start creating this process's CUDA context in a thread, from the process's first
    moments: the driver's start and the context (0.5 to 0.7 s alone on an H200 machine) then
    happen while the main thread imports torch, which they slow (both map memory): about 0.1 s
    is gained net, against making the context after the import.

    For a judge, and for a worker started with ``--context-at-start``: one nothing else is
    timing beside (a run's first worker, a replacement), never a spare. The thread makes the
    driver's primary context of the requested device (``auto`` and ``cuda`` mean device 0, as
    in :func:`resolve_device`) through the driver API, which torch then uses as its own. It
    runs no Python import, so it cannot meet an import of the main thread halfway; the
    environment the driver reads is settled before it starts (:func:`_settle_environment`).
    A failure here (no GPU, no driver) is only a lost head start: :func:`_settle_context`
    makes the context as before, or the device resolves to the CPU.
    """
    index = _device_index(requested)
    if index is None:
        return None
    from fib_core.bench.evaluation.exchange import cuda_driver

    driver = cuda_driver()
    if driver is None:
        return None

    def create() -> None:
        handle, context = ctypes.c_int(), ctypes.c_void_p()
        if driver.cuInit(0) == 0 and driver.cuDeviceGet(ctypes.byref(handle), index) == 0:
            driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle)

    thread = threading.Thread(target=create, name="cuda-context", daemon=True)
    thread.start()
    return thread


def _device_index(requested: str) -> int | None:
    """The CUDA device a ``--device`` value will resolve to, if it is a GPU: ``auto`` and
    ``cuda`` are device 0 (:func:`resolve_device`), ``cuda:N`` is N, anything else None."""
    if requested in ("auto", "cuda"):
        return 0
    kind, _, number = requested.partition(":")
    if kind != "cuda":
        return None
    try:
        return int(number)
    except ValueError:
        return None


def _warm_triton(sock: Any, grace: float = 0.25) -> None:
    """A GPU worker's Triton, before its first task: imported always (about 0.06 s after torch
    on an H200 machine), so that Triton's module is watched by the tamper check in every GPU
    worker alike (:func:`_fingerprint` watches what is imported when it is taken); then,
    unless a task comes within ``grace`` seconds, Triton's ``triton_key`` computed: the hash of
    its own files (its compiler library included) that a process pays once, at its first
    kernel launch (0.35 s of a 0.42 s first GDN decode call on an H200). A worker that waits
    (``run_local.py --watch`` between edits, a spare, a first worker whose launcher is still
    loading) pays it there instead of in its first task; one whose task comes at once
    leaves it to the solution's first launch, or to nobody when the solution launches no
    Triton kernel. The hash cannot be stopped halfway: a task arriving during it waits for
    the rest. CPU work only. A Triton without that function, or one that fails here, is
    left to fail, if at all, in the solution's own call."""
    import select

    try:
        import triton  # noqa: F401
    except Exception:  # not installed, or broken: the solution's own import says so
        return
    if select.select([sock], [], [], grace)[0]:
        return  # the task is here
    try:
        from triton.runtime.cache import triton_key

        triton_key()
    except Exception:  # only a head start
        return
    mark("worker", "triton")


def _settle_context(device: str, early: threading.Thread | None = None) -> None:
    """Create the CUDA context (CUDA's start sets environment variables, which must not read
    as the solution's doing). Called when the first task arrives, not at start-up: a spare
    worker booting beside a timed one must not touch the GPU. ``early``: the thread of
    :func:`_open_context_early`, waited for first."""
    if early is not None:
        early.join()
    if not device.startswith("cuda"):
        return
    import torch

    torch.empty(1, device=device).add_(1)
    torch.cuda.synchronize(device)


def _tampered(baseline: Watched) -> list[str]:
    """Names whose object is no longer the one the baseline saw (a removed name is not
    counted: lazy modules drop and re-add names on their own); about 10 ms for the 25 000
    entries of a worker that imported torch, against 25 ms for a walk of every module."""
    changed = [n for n, space, attr, obj in baseline.mappings if space.get(attr, obj) is not obj]
    changed += [
        n for n, fn, attr, obj in baseline.functions if getattr(fn, attr, obj) is not obj
    ]
    return sorted(changed)


class _ProcessState:
    """Working directory, environment and import path, restored after every task."""

    def __init__(self) -> None:
        self.cwd = os.getcwd()
        self.env = dict(os.environ)
        self.path = list(sys.path)

    def restore(self) -> list[str]:
        changed = []
        try:
            if os.getcwd() != self.cwd:
                changed.append("working directory")
        except OSError:
            changed.append("working directory")
        os.chdir(self.cwd)
        toolchain = sys.modules.get("fib_core.compile.toolchain")  # a CUDA build ran here
        if toolchain is not None:  # the kit's CUDA_HOME export for its build back ends; only
            # that name, and only a real toolkit folder (solution code shares this process)
            value = toolchain.variables_set_here().get("CUDA_HOME")
            if value is not None and os.environ.get("CUDA_HOME") == value and \
                    toolchain.is_cuda_home(Path(value)):
                self.env["CUDA_HOME"] = value
        now = dict(os.environ)
        if now != self.env:
            names = sorted(k for k in now.keys() | self.env.keys() if now.get(k) != self.env.get(k))
            changed.append("environment variables (" + ", ".join(names[:5])
                           + (", ..." if len(names) > 5 else "") + ")")
            os.environ.clear()
            os.environ.update(self.env)
        if sys.path != self.path:
            changed.append("sys.path")
            sys.path[:] = self.path
        return changed


def _send_result(sock: Any, result: Any, tainted: list[str]) -> None:
    from fib_core.bench.evaluation.logs import clip_text
    from fib_core.bench.evaluation.wire import send_frame
    from fib_core.data.json_io import json_safe

    send_frame(sock, {
        "type": "result", "task": result.task_id, "status": result.status,
        "log": clip_text(result.log), "correctness": json_safe(result.correctness),
        "performance": json_safe(result.performance), "extra": json_safe(result.extra),
        "fatal": bool(result.fatal), "tainted": bool(tainted),
    })


@dataclass
class HeadStart:
    """What a worker or judge starts before importing torch, so that it runs during the
    import (about 1.5 s) instead of after it: the CUDA context (:func:`_open_context_early`)
    and ``nvidia-smi`` (:func:`fib_core.bench.evaluation.environment.start_smi`)."""

    context: threading.Thread | None = None
    smi: Any = None

    @classmethod
    def begin(cls, requested_device: str, context: bool) -> HeadStart:
        """Settle the environment, then start both (the context only when ``context``)."""
        from fib_core.bench.evaluation.environment import start_smi

        _settle_environment()  # before the context thread: the driver reads the environment
        index = _device_index(requested_device)
        return cls(_open_context_early(requested_device) if context else None,
                   start_smi(index) if index is not None else None)


def serve(sock: Any, requested_device: str, warnings: list[str], trusted: bool = False,
          ahead: HeadStart | None = None) -> int:
    """Answer tasks until told to close (0) or the GPU context is lost (3). ``ahead``: what
    :meth:`HeadStart.begin` started; without a context thread there the CUDA context is made
    when the first task arrives."""
    from fib_core.bench.evaluation.exchange import receive_arena
    from fib_core.bench.evaluation.wire import ChildGone, recv_message_fds, recv_object, send_frame

    device = resolve_device(requested_device)
    mark("worker", "torch")
    if not device.startswith("cuda"):
        os.environ["TRITON_INTERPRET"] = "1"
    from fib_core.bench.evaluation.environment import collect_environment
    from fib_core.bench.evaluation.evaluator import Evaluator
    from fib_core.bench.evaluation.judge import RemoteChecker
    from fib_core.bench.evaluation.protocol import EvalResult

    ahead = ahead or HeadStart.begin(requested_device, context=False)
    env = collect_environment(device, ahead.smi)
    from dataclasses import asdict

    send_frame(sock, {"type": "ready", "device": device, "env": asdict(env), "warnings": warnings})
    mark("worker", "ready")
    current = {"task": -1, "first": -1}

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
    plugins: set[str] = set()
    if device.startswith("cuda"):
        _warm_triton(sock)
    state: _ProcessState | None = None
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
            arena = receive_arena(message, fds, checker.arena if checker else None)
            if checker is not None:
                checker.arena = arena
            elif arena is not None:
                arena.close()
            continue
        task = message[1]
        current["task"] = task.task_id
        if state is None:
            current["first"] = task.task_id
            mark("worker", "task1")
            _settle_context(device, ahead.context)
            mark("worker", "context")
            state = _ProcessState()
        try:
            _register_plugins(task.config.generator_modules, plugins)
            if baseline is None:
                baseline = _fingerprint()
                mark("worker", "baseline")
            result = evaluator.evaluate(task)
        except Exception:  # a kit bug or a plugin import error: report it, keep serving
            result = EvalResult(task.task_id, EvaluationStatus.RUNTIME_ERROR,
                                "internal error in the benchmark worker:\n" + traceback.format_exc())
        sys.stdout.flush()
        sys.stderr.flush()
        changed = state.restore()
        tainted = _tampered(baseline or Watched())
        if baseline is not None and _dynamo_import(baseline, tainted):
            tainted = []
        if changed or tainted:
            notes = result.extra.setdefault("warnings", [])
            if changed:
                notes.append("the solution changed the worker's " + ", ".join(changed)
                             + " (restored)")
            if tainted:
                notes.append("the solution patched harness or torch functions ("
                             + ", ".join(tainted[:5]) + "); the worker is replaced")
        _send_result(sock, result, tainted)
        if task.task_id == current["first"]:
            mark("worker", "task1-sent")
        if result.fatal or tainted:
            return 3


def serve_judge(sock: Any, requested_device: str, ahead: HeadStart | None = None) -> int:
    """The judge's loop: checks and reference latencies for the parent, nothing else.
    ``ahead``: what :meth:`HeadStart.begin` started (its context thread included)."""
    from dataclasses import asdict

    from fib_core.bench.evaluation.exchange import receive_arena
    from fib_core.bench.evaluation.wire import (
        ChildGone,
        payload_bytes,
        recv_message_fds,
        send_frame,
    )

    device = resolve_device(requested_device)
    mark("judge", "torch")
    if not device.startswith("cuda"):
        os.environ["TRITON_INTERPRET"] = "1"
    from fib_core.bench.evaluation.environment import collect_environment
    from fib_core.bench.evaluation.evaluator import Evaluator
    from fib_core.bench.evaluation.judge import JudgeServer

    ahead = ahead or HeadStart.begin(requested_device, context=True)
    env = collect_environment(device, ahead.smi)
    send_frame(sock, {"type": "ready", "device": device, "env": asdict(env), "warnings": []})
    mark("judge", "ready")
    # The judge's context now (it is never a spare), made in the thread ``ahead`` started:
    # its reads then page-lock memory in threads that find the context made
    # (integrity.PinnedPool).
    _settle_context(device, ahead.context)
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
            try:
                judge.announce_next(message[1])
            except Exception:  # only a head start, as for "task"
                traceback.print_exc()
            continue
        if kind == "task":  # a task started in the worker; no reply is expected
            if message[1] is None:
                continue
            task = message[1]
            try:
                _register_plugins(task.config.generator_modules, plugins)
                judge.announce(task)
            except Exception:  # only a head start: the first check does the work anyway
                traceback.print_exc()
            continue
        task = message[1] if message[1] is not None else task
        try:
            if task is None:
                raise RuntimeError(f"a {kind!r} request before its task")
            _register_plugins(task.config.generator_modules, plugins)
            if kind == "check":
                set_index, n_sets, specs, slot = message[2:6]
                if slot is not None:  # the parent checked the slot and the sizes
                    if arena is None or arena.arena_id != slot[0]:
                        raise RuntimeError("a check names a shared buffer the judge does not have")
                    arena.pin()  # page-locked once this process has its CUDA context
                    blob = arena.region(slot[1], payload_bytes(specs))
                reply = {"type": "verdict", **judge.check(task, set_index, n_sets, specs, blob)}
            else:
                reply = {"type": "latency", **judge.reference_latency(task, message[2])}
        except Exception:
            reply = {"type": "failed", "message": traceback.format_exc()[-4000:]}
        send_frame(sock, reply)


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
    from fib_core.paths import cache_dir

    folder = cache_dir() / "reference"
    return [("hide", str(folder.resolve()))] if folder.is_dir() else []


def main(argv: list[str] | None = None) -> int:
    from fib_core.bench.containment.mounts import parse_mount

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
    from fib_core.bench.containment import sandbox

    mark(args.role, "start")  # before the sandbox: the timeline's file is open from here on
    sandbox.die_with_parent(args.parent)  # also when it ended while this one started
    warnings: list[str] = []
    if args.role == "judge":
        sandbox.forbid_tracing()
    else:
        warnings = sandbox.contain([*args.mount, *_hidden_references(args.trusted)])
    from fib_core.bench.evaluation.wire import send_frame, socket_from_fd

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
