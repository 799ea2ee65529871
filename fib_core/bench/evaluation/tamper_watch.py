"""What a solution may have changed in its worker process, seen after every task.

A persistent worker runs one solution after another, so each task ends with a look at what
the solution could have altered for the next: the kit's and torch's functions and classes
(:func:`fingerprint` once, :func:`tampered` after each task; a worker with a changed one is
replaced), and the working directory, environment and import path (:class:`ProcessState`,
restored). One change is no tampering: what importing ``torch._dynamo`` does on its own
(:func:`dynamo_import`).
"""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Entry = tuple[str, Any, str, Any]  # (name, namespace, attribute, object at the baseline)


@dataclass
class Watched:
    """What :func:`fingerprint` saw: entries of mappings (module dicts, class mappingproxies,
    ``sys.modules``) and of functions (their code and defaults), kept apart so the check
    after each task is two plain comprehensions."""

    mappings: list[Entry] = field(default_factory=list)
    functions: list[Entry] = field(default_factory=list)
    dynamo_loaded: bool = False  # whether torch._dynamo was imported when this was taken
    # The code object and globals of torch's own dynamo wrapper, learnt when the baseline was
    # taken (not after a task, when the solution may have changed what makes it).
    dynamo_wrapper: tuple[Any, dict] | None = None


def fingerprint() -> Watched:
    """The functions and classes of the kit and of torch's key modules, as objects: a solution
    that rebound any of them (or swapped a function's code) leaves this worker unfit for the
    next solution.

    Taken once, at the first task; each namespace is kept as a live view (a module's dict, a
    class's mappingproxy, ``sys.modules``), so the check after every task (:func:`tampered`)
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


def dynamo_import(baseline: Watched, changed: list[str]) -> bool:
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
    """What :func:`fingerprint` has ``torch._disable_dynamo`` wrap, to learn its code."""


def tampered(baseline: Watched) -> list[str]:
    """Names whose object is no longer the one the baseline saw (a removed name is not
    counted: lazy modules drop and re-add names on their own); about 10 ms for the 25 000
    entries of a worker that imported torch, against 25 ms for a walk of every module."""
    changed = [n for n, space, attr, obj in baseline.mappings if space.get(attr, obj) is not obj]
    changed += [
        n for n, fn, attr, obj in baseline.functions if getattr(fn, attr, obj) is not obj
    ]
    return sorted(changed)


class ProcessState:
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
