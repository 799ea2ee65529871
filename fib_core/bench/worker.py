"""Worker process entry point: ``python -m fib_core.bench.worker --fd N --device D``.

Started by :mod:`fib_core.bench.pool` as a fresh interpreter (spawn semantics: no state is
inherited from the parent), with stdout/stderr going to a log file so that even a native crash
leaves its last words for the trace. It talks to the parent over the connection on fd ``N``.

The device is settled *before* anything imports Triton: on a machine without a GPU (or with
``--device cpu``) ``TRITON_INTERPRET=1`` is set so Triton kernels run through the interpreter.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from typing import Any


def resolve_device(requested: str) -> str:
    """'auto' -> 'cuda:0' when a GPU is visible, else 'cpu'; 'cuda' -> 'cuda:0'."""
    import torch

    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda":
        if not torch.cuda.is_available():
            from fib_core.errors import ConfigError

            raise ConfigError("--device cuda was asked for, but torch sees no CUDA GPU here")
        return "cuda:0"
    return requested


def _register_plugins(modules: tuple[str, ...], seen: set[str]) -> None:
    """Import the dataset's generators and any user modules named in the config (once each)."""
    if "fib_core.dataset.generators" not in seen:
        seen.add("fib_core.dataset.generators")
        try:
            gens = importlib.import_module("fib_core.dataset.generators")
            register = getattr(gens, "register_all", None)
            if callable(register):
                register()
        except ImportError:
            pass
    for name in modules:
        if name not in seen:
            seen.add(name)
            importlib.import_module(name)


def serve(conn: Any, requested_device: str) -> int:
    """Answer tasks until told to close (0) or the GPU context is lost (3)."""
    device = resolve_device(requested_device)
    if not device.startswith("cuda"):
        os.environ["TRITON_INTERPRET"] = "1"
    from fib_core.bench.environment import collect_environment
    from fib_core.bench.evaluate import Evaluator
    from fib_core.bench.protocol import EvalResult

    env = collect_environment(device)
    conn.send(("ready", {"device": device, "env": env}))
    current = {"task": -1}
    evaluator = Evaluator(device, env, phase=lambda name: conn.send(("phase", current["task"], name)))
    plugins: set[str] = set()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return 0  # the parent went away
        if message[0] == "close":
            evaluator.close()
            return 0
        task = message[1]
        current["task"] = task.task_id
        try:
            _register_plugins(task.config.generator_modules, plugins)
            result = evaluator.evaluate(task)
        except Exception:  # a kit bug or a plugin import error: report it, keep serving
            result = EvalResult(task.task_id, "RUNTIME_ERROR",
                                "internal error in the benchmark worker:\n" + traceback.format_exc())
        sys.stdout.flush()
        sys.stderr.flush()
        conn.send(("result", result))
        if result.fatal:
            return 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    from multiprocessing.connection import Connection

    conn = Connection(args.fd)
    try:
        return serve(conn, args.device)
    except Exception:
        traceback.print_exc()
        try:
            conn.send(("error", traceback.format_exc()))
        except OSError:
            pass
        return 2


if __name__ == "__main__":
    sys.exit(main())
