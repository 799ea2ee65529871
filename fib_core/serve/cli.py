"""``python -m fib_core serve``: its flags, and the start of the server.

Safe by default: it listens on 127.0.0.1, and every request must carry the token it prints at
start (``Authorization: Bearer <token>``; ``$FIB_SERVE_TOKEN`` chooses it, ``--no-token``
turns the check off). Request bodies and waiting tasks are capped.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any

from fib_core.bench.containment.mounts import HIDE_VAR
from fib_core.bench.settings import BY_NAME, merge
from fib_core.dataset import default_dataset_path
from fib_core.errors import ConfigError, FibError
from fib_core.serve.guard import new_token
from fib_core.serve.scheduler import Scheduler
from fib_core.serve.service import Service, ServiceSettings
from fib_core.serve.tasks import TaskStore

TOKEN_VAR = "FIB_SERVE_TOKEN"
# The engine settings the server takes from its command line (the organizers' flags and the
# kit's other evaluation knobs), spelled as ``python -m fib_core run`` spells them.
ENGINE_SETTINGS = ("warmup_runs", "iterations", "num_trials", "timeout_seconds", "atol", "rtol",
                   "required_matched_ratio", "seed", "isolated", "timing_method")


def add_serve(p: argparse.ArgumentParser) -> None:
    p.add_argument("--local", "--dataset", dest="local", type=Path, metavar="PATH",
                   help="dataset folder (default: $FIB_DATASET_PATH or the embedded dataset)")
    p.add_argument("--devices", metavar="LIST",
                   help="cuda:0,cuda:1 or cpu (default: every visible GPU, else the CPU)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free one)")
    for name in ENGINE_SETTINGS:
        s = BY_NAME[name]
        kwargs: dict[str, Any] = {"dest": name, "default": None, "help": s.help}
        if s.kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif s.choices:
            kwargs["choices"] = list(s.user_choices)
        else:
            kwargs.update(type=s.kind, metavar=s.metavar)
        p.add_argument(s.cli_flag or s.flag, **kwargs)
    p.add_argument("--no-token", action="store_true",
                   help="let requests in without the token (anyone who can reach the port "
                        "can run code on this machine)")
    p.add_argument("--max-body-mb", type=float, default=4.0, metavar="MB",
                   help="largest request body accepted (default 4)")
    p.add_argument("--max-queued", type=int, default=64, metavar="N",
                   help="tasks allowed to wait at once (default 64); more get 429")
    p.add_argument("--max-tasks", type=int, default=1000, metavar="N",
                   help="tasks kept for polling (default 1000; the oldest finished go first)")
    p.add_argument("--save-results", action=argparse.BooleanOptionalAction, default=True,
                   help="append traces and solutions to the dataset (default: yes)")
    p.add_argument("--log-level", default="INFO", type=str.upper,
                   choices=("DEBUG", "INFO", "WARNING", "ERROR"))


def parse_devices(text: str | None, visible: int) -> list[tuple[str, str | None]]:
    """(name, CUDA_VISIBLE_DEVICES value) per lane; ``visible``: how many GPUs torch sees.

    >>> parse_devices("cpu", 0)
    [('cpu', None)]
    >>> parse_devices(None, 2)
    [('cuda:0', '0'), ('cuda:1', '1')]
    """
    # Imported here: fib_core.bench.engine.gpus loads pydantic (~50 ms); this module's import does not.
    from fib_core.bench.engine.gpus import physical_ids

    if text is None:
        names = [f"cuda:{i}" for i in range(visible)] or ["cpu"]
    else:
        names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ConfigError("--devices: empty; pass e.g. cuda:0,cuda:1 or cpu")
    lanes: list[tuple[str, str | None]] = []
    for name in names:
        if name == "cpu":
            lanes.append(("cpu", None))
            continue
        kind, _, index = name.partition(":")
        if kind != "cuda" or not (index or "0").isdigit():
            raise ConfigError(f"--devices: {name!r} is not a device; pass cuda:N or cpu")
        number = int(index or "0")
        if number >= visible:
            raise ConfigError(f"--devices: {name} asked for, but torch sees {visible} GPU(s) "
                              "here; pick one it sees, or cpu")
        lanes.append((f"cuda:{number}", physical_ids([number])[0]))
    if len({device_id is None for _, device_id in lanes}) > 1:
        raise ConfigError("--devices: mixes cpu with GPUs; the timings would not compare, so "
                          "pass one kind")
    return lanes


def run_serve(args: argparse.Namespace) -> int:
    """Start the server; returns when it is shut down (``POST /shutdown`` or Ctrl-C)."""
    try:
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError:
        raise FibError('serve needs its extra: pip install -e ".[serve]" (FastAPI and '
                       "uvicorn)") from None

    # Imported here: fastapi is optional (the serve extra) and takes ~0.45 s to load.
    from fib_core.serve.app import create_app

    logging.basicConfig(level=args.log_level, format="%(levelname)s %(name)s: %(message)s")
    for flag, value in (("--max-queued", args.max_queued), ("--max-tasks", args.max_tasks),
                        ("--max-body-mb", args.max_body_mb)):
        if value <= 0:
            raise ConfigError(f"{flag} {value}: must be above 0")
    flags = {n: getattr(args, n) for n in ENGINE_SETTINGS if getattr(args, n) is not None}
    merge(flags=flags)  # a bad value is one line now, not a failed task later
    token = None if args.no_token else (os.environ.pop(TOKEN_VAR, "") or new_token())
    dataset = Path(args.local) if args.local is not None else Path(default_dataset_path())
    if args.save_results and dataset.is_dir() and not os.access(dataset, os.W_OK):
        raise ConfigError(f"--local {dataset}: not writable, so the traces could not be kept; "
                          "pass --no-save-results, or a dataset folder you can write")
    lanes = parse_devices(args.devices, _visible_gpus())
    store = TaskStore(max_tasks=args.max_tasks)
    service = Service(ServiceSettings(dataset.resolve(), flags, args.save_results), store)
    _hide_results(dataset.resolve())
    scheduler = Scheduler(store, str(dataset.resolve()), lanes, service.make_request,
                          service.finished, max_queued=args.max_queued,
                          task_timeout=service.task_timeout)
    sock = _bind(args.host, args.port)
    config = uvicorn.Config(None, log_level=args.log_level.lower(), access_log=False)
    server = uvicorn.Server(config)

    def stop() -> None:
        server.should_exit = True

    config.app = create_app(service, scheduler, token=token,
                            max_body=int(args.max_body_mb * 1024 * 1024), on_shutdown=stop)
    scheduler.start()
    host, port = sock.getsockname()[:2]
    _announce(host, port, token, lanes, dataset, args.no_token)
    try:
        server.run(sockets=[sock])
    finally:
        scheduler.shutdown()
    return 0


def _visible_gpus() -> int:
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    return torch.cuda.device_count() if torch.backends.cuda.is_built() else 0


def _hide_results(dataset: Path) -> None:
    """The dataset's solutions/ and traces/ (other tasks' code and results) are hidden from
    every worker the lanes start (:func:`fib_core.bench.containment.mounts.worker_mounts`)."""
    folders = []
    for folder in (dataset / "solutions", dataset / "traces"):
        try:  # made now, so that what the server writes there later is hidden too
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue  # a read-only dataset: nothing will be written there
        folders.append(folder)
    os.environ[HIDE_VAR] = os.pathsep.join(str(f) for f in folders)


def _bind(host: str, port: int) -> Any:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise ConfigError(f"--host {host} --port {port}: cannot listen there ({err.strerror}); "
                          "pick another port, or --port 0 for any free one") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _announce(host: str, port: int, token: str | None, lanes: list[Any], dataset: Path,
              no_token: bool) -> None:
    shown = f"[{host}]" if ":" in host else host
    print(f"fib_core serve: {dataset} on {', '.join(n for n, _ in lanes)}", flush=True)
    if token is not None:
        print(f"token: {token}", flush=True)
        print("send it as the header 'Authorization: Bearer <token>'", flush=True)
    else:
        print("no token: anyone who reaches this port can run code here", flush=True)
    if no_token and not _loopback(host):
        print(f"warning: listening on {host} without a token", file=sys.stderr, flush=True)
    print(f"listening on http://{shown}:{port}", flush=True)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
