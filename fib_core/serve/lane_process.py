"""One device's evaluation process: it holds the dataset and runs each request it is sent
through :func:`fib_core.project.runflow.execute` (the engine's one-shard run, then the
FlashInfer baseline on a GPU), the flow ``run_local.py`` runs on one GPU (sandboxed worker,
the judge, the same settings and timers), then sends the traces back.

It is kit code only: solutions run in the workers the engine starts from here, inside their
sandbox. A GPU lane sees its GPU alone (``CUDA_VISIBLE_DEVICES``), as the several-GPU run's
processes do.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from typing import Any

from fib_core.bench.containment.sandbox import die_with_parent
from fib_core.bench.engine.shard_run import RunRequest
from fib_core.bench.events import Log
from fib_core.errors import FibError
from fib_core.project.runflow import execute

_WARNED: set[str] = set()


def _warn_once(event: Any) -> None:
    """The engine's warnings (a sandbox step the machine refused, ...) in the server's log,
    once per lane: not the solution's business, the operator's."""
    if isinstance(event, Log) and event.level == "warning" and event.message.startswith(
            "sandbox:") and event.message not in _WARNED:
        _WARNED.add(event.message)
        print(f"warning: {event.message}", file=sys.stderr, flush=True)


def lane_main(conn: Any, device_id: str | None, dataset_path: str, parent: int) -> None:
    """Serve requests from ``conn`` until it closes: ``("run", RunRequest fields)`` answered by
    ``("done", ShardResult dict)``, ``("error", one line)`` or ``("bug", traceback)``."""
    if device_id is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = device_id
    die_with_parent(parent, signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    # Imported here: fib_core.data loads pydantic (~50 ms); this module's import does not.
    from fib_core.data import TraceSet

    trace_set = TraceSet.from_path(dataset_path)
    conn.send(("ready", None))
    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            return
        if kind != "run":
            return
        try:
            shard = execute(RunRequest(**payload), on_event=_warn_once, trace_set=trace_set)
            conn.send(("done", shard.to_dict()))
        except FibError as err:
            conn.send(("error", str(err)))
        except Exception:  # a kit bug: the task fails with it, the lane goes on
            conn.send(("bug", traceback.format_exc()))
