"""``python -m fib_core serve`` driven over HTTP, as an agent drives it: a real server process
on the CPU, a toy dataset, plain ``urllib`` requests. From submission to traces (in the
response and in the dataset), batch polling, the 4xx answers, the token, the body cap, and
crashing and hostile solutions (which get a verdict, while the server goes on)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fib_core.bench.containment.sandbox import namespaces_available

pytestmark = pytest.mark.slow

SMALL = "toy-0001-small"
LARGE = "toy-0002-large"


def test_lookups(server, serve_kit) -> None:
    status, definitions = server.call("/definitions")
    assert status == 200 and definitions == [
        {"name": "toy_axpy", "description": "Test-only operator: out = alpha * x + y, row by row."}]
    status, definition = server.call("/definitions/toy_axpy")
    assert status == 200 and definition["inputs"]["alpha"]["shape"] is None
    status, workloads = server.call("/definitions/toy_axpy/workloads")
    assert [w["uuid"] for w in workloads] == [SMALL, LARGE]
    status, workload = server.call(f"/workloads/{LARGE}")
    assert status == 200 and workload["axes"] == {"n": 64}


def test_submission_to_traces(server, serve_kit) -> None:
    sol = serve_kit.fixture_solution("correct", author="alice")
    status, reply = server.call("/evaluate", {"solution": sol})
    assert status == 200
    name = reply["normalized_solution_name"]
    assert name.startswith("correct_") and len(name) == len("correct_") + 8
    task = server.finished(reply["task_id"])
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


def test_batch_polling(server, serve_kit) -> None:
    wrong = server.evaluate(serve_kit.fixture_solution("wrong"), [SMALL])
    crash = server.evaluate(serve_kit.fixture_solution("kills_process"), [SMALL])
    empty = server.evaluate(serve_kit.fixture_solution("correct"), [])
    broken = server.evaluate(serve_kit.solution("broken", "def run(x, y, alpha, out:\n"), [SMALL])
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
    compiled = server.finished(broken)  # the organizers' minimal example: a syntax error
    assert compiled["status"] == "completed"
    assert compiled["traces"][0]["evaluation"]["status"] == "COMPILE_ERROR"
    status, reply = server.call("/tasks/batch", {"task_ids": [wrong, "nope"]})
    assert status == 404 and "nope" in reply["detail"]
    # the server goes on after a crash
    again = server.finished(server.evaluate(serve_kit.fixture_solution("correct"), [SMALL]))
    assert again["traces"][0]["evaluation"]["status"] == "PASSED"
    status, health = server.call("/health")
    assert health == {"status": "ok", "workers": [{"device": "cpu", "healthy": True}],
                      "queue_size": 0}


def test_not_found_and_malformed(server, serve_kit) -> None:
    for path in ("/definitions/nope", "/definitions/nope/workloads", "/workloads/nope",
                 "/tasks/nope"):
        status, reply = server.call(path)
        assert status == 404 and "nope" in reply["detail"], path
    status, _ = server.call("/evaluate", raw=b"{not json")
    assert status == 422
    status, _ = server.call("/evaluate", {"solution": "text"})
    assert status == 422
    status, _ = server.call("/evaluate", {"solution": serve_kit.fixture_solution("correct"),
                                          "typo": 1})
    assert status == 422
    bad = serve_kit.fixture_solution("correct")
    del bad["spec"]["entry_point"]
    status, reply = server.call("/evaluate", {"solution": bad})
    assert status == 422 and "entry_point" in reply["detail"]
    other = {**serve_kit.fixture_solution("correct"), "definition": "nope"}
    status, reply = server.call("/evaluate", {"solution": other})
    assert status == 400 and "'nope'" in reply["detail"]
    status, reply = server.call("/evaluate", {"solution": serve_kit.fixture_solution("correct"),
                                              "workload_uuids": ["missing-uuid"]})
    assert status == 400 and "missing-uuid" in reply["detail"]
    status, _ = server.call("/tasks/whatever?timeout=5000")
    assert status == 422


def test_token_is_required(server, serve_kit) -> None:
    for token in (None, "wrong-token"):
        status, reply = server.call("/definitions", token=token)
        assert status == 401 and "Bearer" in reply["detail"]
        status, _ = server.call("/evaluate", {"solution": serve_kit.fixture_solution("correct")},
                                token=token)
        assert status == 401
        status, _ = server.call("/shutdown", method="POST", raw=b"", token=token)
        assert status == 401
    assert server.process.poll() is None


def test_oversize_body(server, serve_kit) -> None:
    big = serve_kit.solution("big", "X = '" + "a" * 400_000 + "'\n")
    status, reply = server.call("/evaluate", {"solution": big})
    assert status == 413 and "--max-body-mb" in reply["detail"]
    # the same without a declared length (chunked): cut off all the same
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    body = json.dumps({"solution": big}).encode()
    conn.request("POST", "/evaluate", body=iter([body[i:i + 65536]
                                                 for i in range(0, len(body), 65536)]),
                 headers={"Authorization": f"Bearer {server.token}",
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


def test_hostile_solution_cannot_reach_other_tasks(server, serve_kit) -> None:
    mine = serve_kit.fixture_solution("correct", author="victim")
    mine["sources"][0]["content"] += "# the victim's own copy\n"
    first = server.finished(server.evaluate(mine, [SMALL]))
    assert first["traces"][0]["evaluation"]["status"] == "PASSED"
    assert (server.dataset / "traces" / "victim").is_dir()
    source = HOSTILE.format(root=str(server.dataset), port=server.port)
    task = server.finished(server.evaluate(serve_kit.solution("snoop", source, author="mallory"),
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


def test_client_example_of_the_docs(server, serve_kit, tmp_path: Path, repo_root: Path) -> None:
    """The plain-HTTP client of docs/serve.md (the README links that page), run as written
    against the server."""
    docs = (repo_root / "docs" / "serve.md").read_text()
    block = docs.split("## Client (plain HTTP, standard library)", 1)[1]
    code = block.split("```python\n", 1)[1].split("```", 1)[0]
    assert "(docs/serve.md)" in (repo_root / "README.md").read_text()
    sol = serve_kit.fixture_solution("correct", author="docs")
    sol["sources"][0]["content"] += "# the docs' copy\n"
    (tmp_path / "solution.json").write_text(json.dumps(sol))
    (tmp_path / "client.py").write_text(code)
    env = {**os.environ, "FIB_SERVE_URL": f"http://127.0.0.1:{server.port}",
           "FIB_SERVE_TOKEN": server.token}
    out = subprocess.run([sys.executable, "client.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"{SMALL[:8]} PASSED", f"{LARGE[:8]} PASSED"]


HOSTILE_FIXTURES = Path(__file__).resolve().parents[1] / "hostile" / "fixtures"
# fixture -> the verdicts it may get (tests/hostile/test_containment.py has the same)
ATTACKS = {"forge_result": {"RUNTIME_ERROR"}, "rewrite_dataset": {"RUNTIME_ERROR"},
           "patch_checker": {"INCORRECT_NUMERICAL", "RUNTIME_ERROR"}}


def test_hostile_corpus_through_the_server(server, serve_kit) -> None:
    """Attacks of the hostile corpus, submitted over HTTP: each gets a failing verdict, what the
    server stored before stays as it was, and the server goes on."""
    kept = serve_kit.fixture_solution("wrong", "keeper")
    kept["sources"][0]["content"] += "# the keeper's own copy\n"  # not filed under another
    honest = server.finished(server.evaluate(kept, [SMALL]))
    stored = server.dataset / "traces" / "keeper" / "toy" / "toy_axpy.jsonl"
    before = stored.read_bytes()
    workloads = (server.dataset / "workloads" / "toy" / "toy_axpy.jsonl").read_bytes()
    # Without namespaces nothing stops a solution from rewriting the dataset (the run warns).
    attacks = [n for n in ATTACKS if namespaces_available() or n != "rewrite_dataset"]
    ids = {name: server.evaluate(serve_kit.solution(
        name, (HOSTILE_FIXTURES / f"{name}.py").read_text(), "attacker"), [SMALL])
        for name in attacks}
    for name, task_id in ids.items():
        task = server.finished(task_id)
        assert task["status"] == "completed", (name, task)
        status = task["traces"][0]["evaluation"]["status"]
        assert status in ATTACKS[name], (name, status, task["traces"][0]["evaluation"]["log"])
    assert stored.read_bytes() == before
    assert (server.dataset / "workloads" / "toy" / "toy_axpy.jsonl").read_bytes() == workloads
    assert server.call(f"/tasks/{honest['task_id']}")[1] == honest
    assert honest["traces"][0]["evaluation"]["status"] == "INCORRECT_NUMERICAL"


def _lane_pids(server_pid: int) -> list[int]:
    """The server's evaluation processes (its children started by multiprocessing)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if parent == server_pid and b"spawn_main" in command:
            found.append(int(entry.name))
    return found


def test_a_lost_evaluation_process_is_replaced(server, serve_kit) -> None:
    import signal
    import time

    if not Path("/proc/self/stat").exists():
        pytest.skip("needs /proc")
    [lane] = _lane_pids(server.process.pid)
    os.kill(lane, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while server.call("/health")[1]["workers"][0]["healthy"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert server.call("/health")[1]["workers"] == [{"device": "cpu", "healthy": False}]
    task = server.finished(server.evaluate(serve_kit.fixture_solution("correct"), [SMALL]))
    assert task["traces"][0]["evaluation"]["status"] == "PASSED"
    assert server.call("/health")[1]["workers"] == [{"device": "cpu", "healthy": True}]
    assert _lane_pids(server.process.pid) != [lane]
