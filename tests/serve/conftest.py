"""A real ``python -m fib_core serve`` process for the tests, and a plain-HTTP client for it.

``serve_kit`` gives the helpers (start a server on a dataset, stop it, a toy dataset, the
fixture solutions); ``server`` is one server on the toy dataset shared by a test module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TOY = Path(__file__).resolve().parents[1] / "bench" / "fixtures"
TOKEN = "test-token-0123456789"


@dataclass
class Server:
    process: subprocess.Popen
    port: int
    dataset: Path
    token: str = TOKEN
    output: list[str] = field(default_factory=list)

    def call(self, path: str, body: object = None, *, token: str | None = TOKEN,
             method: str | None = None, raw: bytes | None = None) -> tuple[int, object]:
        """(status, JSON reply) of one request; ``token`` None sends no Authorization."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                            else None)
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                     headers=headers,
                                     method=method or ("POST" if data is not None else "GET"))
        try:
            with urllib.request.urlopen(req, timeout=300) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as err:
            return err.code, json.load(err)

    def evaluate(self, sol: dict, uuids: list[str] | None = None) -> str:
        body: dict = {"solution": sol}
        if uuids is not None:
            body["workload_uuids"] = uuids
        status, reply = self.call("/evaluate", body)
        assert status == 200, reply
        return reply["task_id"]

    def finished(self, task_id: str, timeout: float = 600) -> dict:
        status, task = self.call(f"/tasks/{task_id}?timeout={timeout}")
        assert status == 200, task
        assert task["status"] in ("completed", "failed"), task
        return task


def solution(name: str, source: str, author: str = "tests") -> dict:
    return {"name": name, "definition": "toy_axpy", "author": author,
            "spec": {"language": "python", "target_hardware": ["cpu", "cuda"],
                     "entry_point": "main.py::run"},
            "sources": [{"path": "main.py", "content": source}]}


def fixture_solution(name: str, author: str = "tests") -> dict:
    """A toy solution of tests/bench/fixtures/solutions (correct, wrong, kills_process...)."""
    return solution(name, (TOY / "solutions" / f"{name}.py").read_text(), author)


def toy_dataset(root: Path) -> Path:
    (root / "definitions" / "toy").mkdir(parents=True)
    (root / "workloads" / "toy").mkdir(parents=True)
    shutil.copy(TOY / "toy_axpy.json", root / "definitions" / "toy" / "toy_axpy.json")
    shutil.copy(TOY / "toy_axpy.jsonl", root / "workloads" / "toy" / "toy_axpy.jsonl")
    return root


def start_server(dataset: Path, *extra: str, devices: str = "cpu") -> Server:
    """A server on ``dataset`` (any free port), once its lanes are ready."""
    env = {**os.environ, "FIB_SERVE_TOKEN": TOKEN}
    process = subprocess.Popen(
        [sys.executable, "-m", "fib_core", "serve", "--local", str(dataset), "--devices",
         devices, "--port", "0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + 120
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith("listening on http://127.0.0.1:"):
            server = Server(process, int(line.rsplit(":", 1)[1]), dataset, output=seen)
            # keep reading what it prints, so a full pipe never blocks it
            threading.Thread(target=seen.extend, args=(process.stdout,), daemon=True).start()
            _wait_healthy(server)
            return server
    process.kill()
    raise AssertionError("the server did not start:\n" + "".join(seen))


def _wait_healthy(server: Server) -> None:
    deadline = time.monotonic() + 300
    body: object = None
    while time.monotonic() < deadline:
        status, body = server.call("/health")
        if status == 200 and all(w["healthy"] for w in body["workers"]):
            return
        time.sleep(0.5)
    raise AssertionError(f"the lanes never became healthy: {body}")


def stop_server(server: Server) -> None:
    if server.process.poll() is None:
        server.call("/shutdown", method="POST", raw=b"")
        try:
            server.process.wait(30)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(10)


@dataclass(frozen=True)
class ServeKit:
    """The helpers, handed to tests as one fixture (test modules cannot import each other)."""

    start: object = staticmethod(start_server)
    stop: object = staticmethod(stop_server)
    toy_dataset: object = staticmethod(toy_dataset)
    solution: object = staticmethod(solution)
    fixture_solution: object = staticmethod(fixture_solution)


@pytest.fixture(scope="session")
def serve_kit() -> ServeKit:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    return ServeKit()


@pytest.fixture(scope="module")
def server(serve_kit: ServeKit, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server on a toy dataset for the module; bodies capped at 0.25 MB."""
    running = start_server(toy_dataset(tmp_path_factory.mktemp("serve") / "dataset"),
                           "--max-body-mb", "0.25", "--timeout", "60")
    yield running
    stop_server(running)
    assert running.process.returncode == 0, "".join(running.output)
