"""``python -m fib_core serve`` driven over HTTP, as an agent drives it: a real server process
on the CPU, a toy dataset, plain ``urllib`` requests. From submission to traces (in the
response and in the dataset), batch polling, the 4xx answers, the token, the body cap, and
crashing and hostile solutions (which get a verdict, while the server goes on)."""

from __future__ import annotations

import http.client
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
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from fib_core.bench.sandbox import namespaces_available  # noqa: E402

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
TOY = HERE.parent / "bench" / "fixtures"
TOKEN = "test-token-0123456789"
SMALL = "toy-0001-small"
LARGE = "toy-0002-large"


@dataclass
class Server:
    process: subprocess.Popen
    port: int
    dataset: Path

    def call(self, path: str, body: object = None, *, token: str | None = TOKEN,
             method: str | None = None, raw: bytes | None = None) -> tuple[int, object]:
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


def solution(name: str, source: str, author: str = "tests") -> dict:
    return {"name": name, "definition": "toy_axpy", "author": author,
            "spec": {"language": "python", "target_hardware": ["cpu", "cuda"],
                     "entry_point": "main.py::run"},
            "sources": [{"path": "main.py", "content": source}]}


def fixture_solution(name: str, author: str = "tests") -> dict:
    return solution(name, (TOY / "solutions" / f"{name}.py").read_text(), author)


def start_server(dataset: Path, *extra: str) -> Server:
    env = {**os.environ, "FIB_SERVE_TOKEN": TOKEN}
    process = subprocess.Popen(
        [sys.executable, "-m", "fib_core", "serve", "--local", str(dataset), "--devices", "cpu",
         "--port", "0", "--timeout", "60", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + 120
    seen = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith("listening on http://127.0.0.1:"):
            port = int(line.rsplit(":", 1)[1])
            server = Server(process, port, dataset)
            # keep reading what it prints, so a full pipe never blocks it
            threading.Thread(target=seen.extend, args=(process.stdout,), daemon=True).start()
            _wait_healthy(server)
            return server
    process.kill()
    raise AssertionError("the server did not start:\n" + "".join(seen))


def _wait_healthy(server: Server) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status, body = server.call("/health")
        if status == 200 and all(w["healthy"] for w in body["workers"]):
            return
        time.sleep(0.5)
    raise AssertionError(f"the lane never became healthy: {body}")


def stop_server(server: Server) -> None:
    if server.process.poll() is None:
        server.call("/shutdown", method="POST", raw=b"")
        try:
            server.process.wait(30)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(10)
    if server.process.stdout is not None:
        server.process.stdout.close()


def toy_dataset(root: Path) -> Path:
    (root / "definitions" / "toy").mkdir(parents=True)
    (root / "workloads" / "toy").mkdir(parents=True)
    shutil.copy(TOY / "toy_axpy.json", root / "definitions" / "toy" / "toy_axpy.json")
    shutil.copy(TOY / "toy_axpy.jsonl", root / "workloads" / "toy" / "toy_axpy.jsonl")
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start_server(toy_dataset(tmp_path_factory.mktemp("serve") / "dataset"),
                           "--max-body-mb", "0.25")
    yield running
    stop_server(running)
    assert running.process.returncode == 0


def evaluate(server: Server, sol: dict, uuids: list[str] | None = None) -> str:
    body: dict = {"solution": sol}
    if uuids is not None:
        body["workload_uuids"] = uuids
    status, reply = server.call("/evaluate", body)
    assert status == 200, reply
    return reply["task_id"]


def finished(server: Server, task_id: str) -> dict:
    status, task = server.call(f"/tasks/{task_id}?timeout=240")
    assert status == 200, task
    assert task["status"] in ("completed", "failed"), task
    return task


def test_lookups(server: Server) -> None:
    status, definitions = server.call("/definitions")
    assert status == 200 and definitions == [
        {"name": "toy_axpy", "description": "Test-only operator: out = alpha * x + y, row by row."}]
    status, definition = server.call("/definitions/toy_axpy")
    assert status == 200 and definition["inputs"]["alpha"]["shape"] is None
    status, workloads = server.call("/definitions/toy_axpy/workloads")
    assert [w["uuid"] for w in workloads] == [SMALL, LARGE]
    status, workload = server.call(f"/workloads/{LARGE}")
    assert status == 200 and workload["axes"] == {"n": 64}


def test_submission_to_traces(server: Server) -> None:
    sol = fixture_solution("correct", author="alice")
    status, reply = server.call("/evaluate", {"solution": sol})
    assert status == 200
    name = reply["normalized_solution_name"]
    assert name.startswith("correct_") and len(name) == len("correct_") + 8
    task = finished(server, reply["task_id"])
    assert task["status"] == "completed" and task["error"] is None
    assert task["definition"] == "toy_axpy" and task["solution"] == name
    verdicts = {t["workload"]["uuid"]: t["evaluation"]["status"] for t in task["traces"]}
    assert verdicts == {SMALL: "PASSED", LARGE: "PASSED"}
    assert all(t["solution"] == name for t in task["traces"])
    stored = server.dataset / "traces" / "alice" / "toy" / "toy_axpy.jsonl"
    lines = [json.loads(line) for line in stored.read_text().splitlines()]
    assert {(t["solution"], t["workload"]["uuid"]) for t in lines} >= {(name, SMALL), (name, LARGE)}
    assert (server.dataset / "solutions" / "alice" / "toy_axpy" / f"{name}.json").is_file()
    # The same code again: the same name (the organizers' rule)
    assert server.call("/evaluate", {"solution": sol, "workload_uuids": []})[1][
        "normalized_solution_name"] == name


def test_batch_polling(server: Server) -> None:
    wrong = evaluate(server, fixture_solution("wrong"), [SMALL])
    crash = evaluate(server, fixture_solution("kills_process"), [SMALL])
    empty = evaluate(server, fixture_solution("correct"), [])
    status, now = server.call("/tasks/batch", {"task_ids": [wrong, crash], "timeout": 0})
    assert status == 200 and [t["task_id"] for t in now] == [wrong, crash]
    assert {t["status"] for t in now} <= {"pending", "running", "completed"}
    status, done = server.call("/tasks/batch", {"task_ids": [wrong, crash, wrong, empty],
                                                "timeout": 240})
    assert status == 200
    assert [t["task_id"] for t in done] == [wrong, crash, wrong, empty]
    assert done[0] == done[2]
    assert done[0]["status"] == "completed"
    assert done[0]["traces"][0]["evaluation"]["status"] == "INCORRECT_NUMERICAL"
    assert done[1]["status"] == "completed"  # a crash is the solution's verdict, not the task's
    assert done[1]["traces"][0]["evaluation"]["status"] == "RUNTIME_ERROR"
    assert done[3]["status"] == "failed" and "no workloads" in done[3]["error"]
    status, reply = server.call("/tasks/batch", {"task_ids": [wrong, "nope"]})
    assert status == 404 and "nope" in reply["detail"]
    # the server goes on after a crash
    again = finished(server, evaluate(server, fixture_solution("correct"), [SMALL]))
    assert again["traces"][0]["evaluation"]["status"] == "PASSED"
    status, health = server.call("/health")
    assert health == {"status": "ok", "workers": [{"device": "cpu", "healthy": True}],
                      "queue_size": 0}


def test_not_found_and_malformed(server: Server) -> None:
    for path in ("/definitions/nope", "/definitions/nope/workloads", "/workloads/nope",
                 "/tasks/nope"):
        status, reply = server.call(path)
        assert status == 404 and "nope" in reply["detail"], path
    status, _ = server.call("/evaluate", raw=b"{not json")
    assert status == 422
    status, _ = server.call("/evaluate", {"solution": "text"})
    assert status == 422
    status, _ = server.call("/evaluate", {"solution": fixture_solution("correct"), "typo": 1})
    assert status == 422
    bad = fixture_solution("correct")
    del bad["spec"]["entry_point"]
    status, reply = server.call("/evaluate", {"solution": bad})
    assert status == 422 and "entry_point" in reply["detail"]
    other = {**fixture_solution("correct"), "definition": "nope"}
    status, reply = server.call("/evaluate", {"solution": other})
    assert status == 400 and "'nope'" in reply["detail"]
    status, reply = server.call("/evaluate", {"solution": fixture_solution("correct"),
                                              "workload_uuids": ["missing-uuid"]})
    assert status == 400 and "missing-uuid" in reply["detail"]
    status, _ = server.call("/tasks/whatever?timeout=5000")
    assert status == 422


def test_token_is_required(server: Server) -> None:
    for token in (None, "wrong-token"):
        status, reply = server.call("/definitions", token=token)
        assert status == 401 and "Bearer" in reply["detail"]
        status, _ = server.call("/evaluate", {"solution": fixture_solution("correct")},
                                token=token)
        assert status == 401
        status, _ = server.call("/shutdown", method="POST", raw=b"", token=token)
        assert status == 401
    assert server.process.poll() is None


def test_oversize_body(server: Server) -> None:
    big = solution("big", "X = '" + "a" * 400_000 + "'\n")
    status, reply = server.call("/evaluate", {"solution": big})
    assert status == 413 and "--max-body-mb" in reply["detail"]
    # the same without a declared length (chunked): cut off all the same
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    body = json.dumps({"solution": big}).encode()
    conn.request("POST", "/evaluate", body=iter([body[i:i + 65536]
                                                 for i in range(0, len(body), 65536)]),
                 headers={"Authorization": f"Bearer {TOKEN}",
                          "Content-Type": "application/json"}, encode_chunked=True)
    assert conn.getresponse().status == 413
    conn.close()


HOSTILE = '''
import os
import urllib.error
import urllib.request

ROOT = {root!r}
PORT = {port}


def run(x, y, alpha, out):
    seen = []
    for sub in ("traces", "solutions"):
        try:
            seen += [sub + "/" + p for p in sorted(os.listdir(os.path.join(ROOT, sub)))]
        except OSError:
            seen.append(sub + ": refused")
    token = os.environ.get("FIB_SERVE_TOKEN")
    try:
        req = urllib.request.Request("http://127.0.0.1:%d/tasks/batch" % PORT,
                                     data=b'{{"task_ids": []}}', method="POST",
                                     headers={{"Authorization": "Bearer %s" % token}})
        code = urllib.request.urlopen(req, timeout=10).status
    except urllib.error.HTTPError as err:
        code = err.code
    except OSError:
        code = "unreachable"
    raise RuntimeError("SEEN %s TOKEN %s HTTP %s" % (seen, token, code))
'''


def test_hostile_solution_cannot_reach_other_tasks(server: Server) -> None:
    mine = fixture_solution("correct", author="victim")
    mine["sources"][0]["content"] += "# the victim's own copy\n"
    first = finished(server, evaluate(server, mine, [SMALL]))
    assert first["traces"][0]["evaluation"]["status"] == "PASSED"
    assert (server.dataset / "traces" / "victim").is_dir()
    source = HOSTILE.format(root=str(server.dataset), port=server.port)
    task = finished(server, evaluate(server, solution("snoop", source, author="mallory"),
                                     [SMALL]))
    assert task["status"] == "completed"
    [trace] = task["traces"]
    assert trace["evaluation"]["status"] == "RUNTIME_ERROR"
    log = trace["evaluation"]["log"]
    assert "TOKEN None" in log  # the server's token never reaches a worker
    assert "HTTP 401" in log or "HTTP unreachable" in log
    if namespaces_available():
        assert "victim" not in log and "SEEN [" in log
    status, after = server.call(f"/tasks/{first['task_id']}")
    assert after == first  # its result is as it was


def test_client_example_of_the_docs(server: Server, tmp_path: Path, repo_root: Path) -> None:
    """The plain-HTTP client of docs/serve.md (the README holds the same block), run as
    written against the server."""
    docs = (repo_root / "docs" / "serve.md").read_text()
    block = docs.split("## Client (plain HTTP, standard library)", 1)[1]
    code = block.split("```python\n", 1)[1].split("```", 1)[0]
    assert f"```python\n{code}```" in (repo_root / "README.md").read_text()
    sol = fixture_solution("correct", author="docs")
    sol["sources"][0]["content"] += "# the docs' copy\n"
    (tmp_path / "solution.json").write_text(json.dumps(sol))
    (tmp_path / "client.py").write_text(code)
    env = {**os.environ, "FIB_SERVE_URL": f"http://127.0.0.1:{server.port}",
           "FIB_SERVE_TOKEN": TOKEN}
    out = subprocess.run([sys.executable, "client.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"{SMALL[:8]} PASSED", f"{LARGE[:8]} PASSED"]
