"""Hostile solutions are contained: each attack fails or is flagged for the attacker only, every
other solution's verdicts, stored traces and cached references stay as they were, and no
process outlives the run, in persistent and isolated mode."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import fib_core
from fib_core.bench import Benchmark, BenchmarkConfig, Log
from fib_core.bench.containment.sandbox import namespaces_available
from fib_core.data.traceset import TraceSet

HERE = Path(__file__).parent
BENCH_FIXTURES = HERE.parent / "bench" / "fixtures"
# HOSTILE_DEVICE=cuda runs the corpus on a GPU (benchmarks/gpu_checks.sh, step "hostile").
DEVICE = os.environ.get("HOSTILE_DEVICE", "cpu")
FAST = dict(warmup_runs=1, iterations=3, num_trials=2, device=DEVICE, timeout_seconds=30)
SMALL = ("toy-0001-small",)

# attacker -> (acceptable statuses, text the log must contain or None)
ATTACKS: dict[str, tuple[set[str], str | None]] = {
    "patch_checker": ({"INCORRECT_NUMERICAL", "RUNTIME_ERROR"}, None),
    "steal_reference": ({"INCORRECT_NUMERICAL"}, None),
    "forge_result": ({"RUNTIME_ERROR"}, None),
    "garbage_pipe": ({"RUNTIME_ERROR"}, "malformed"),
    "huge_prefix": ({"RUNTIME_ERROR"}, "exceeds"),
    "truncated_frame": ({"RUNTIME_ERROR"}, "incomplete message"),
    "rewrite_dataset": ({"RUNTIME_ERROR"}, "Read-only file system"),
    "rewrite_kit": ({"RUNTIME_ERROR"}, "Read-only file system"),
    "plant_module": ({"RUNTIME_ERROR"}, "Read-only file system"),
    "huge_output": ({"RUNTIME_ERROR"}, "bytes omitted"),
}
# Contained without failing: the solution answers correctly, its side effects are undone
# (poison_cache finds the reference cache hidden, an empty folder; without namespaces its
# rewrites are rejected by the signatures, checked below).
HARMLESS = ("spawn_children", "chdir_env", "poison_cache")


def _solution(name: str) -> dict:
    folder = HERE / "fixtures"
    path = folder / f"{name}.py"
    if not path.exists():
        path = BENCH_FIXTURES / "solutions" / f"{name}.py"
    source = path.read_text()
    return {
        "name": name,
        "definition": "toy_axpy",
        "author": "tests",
        "description": source.splitlines()[0].strip('"'),
        "spec": {
            "language": "python",
            "target_hardware": ["cpu", "cuda"],
            "entry_point": "main.py::run",
            "dependencies": [],
            "destination_passing_style": True,
        },
        "sources": [{"path": "main.py", "content": source}],
    }


def _dataset(root: Path, names: list[str]) -> Path:
    (root / "definitions" / "toy").mkdir(parents=True, exist_ok=True)
    (root / "workloads" / "toy").mkdir(parents=True, exist_ok=True)
    shutil.copy(BENCH_FIXTURES / "toy_axpy.json", root / "definitions" / "toy" / "toy_axpy.json")
    shutil.copy(BENCH_FIXTURES / "toy_axpy.jsonl", root / "workloads" / "toy" / "toy_axpy.jsonl")
    folder = root / "solutions" / "tests" / "toy_axpy"
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / f"{name}.json").write_text(json.dumps(_solution(name)))
    return root


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _tagged(tag: str) -> list[int]:
    """Processes whose environment carries ``HOSTILE_TAG=tag`` (this run's, and only them)."""
    needle = f"HOSTILE_TAG={tag}".encode()
    found = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        if pid == os.getpid():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in env and state != "Z":
            found.append(pid)
    return found


def _run(root: Path, names: list[str], isolated: bool, events: list | None = None) -> list:
    """Traces of ``names`` evaluated in this order by one engine (a name may repeat)."""
    cfg = BenchmarkConfig(isolated=isolated, workloads=SMALL, **FAST)
    trace_set = TraceSet.from_path(root)
    by_name = {s.name: s for s in trace_set.solutions["toy_axpy"]}
    traces = []
    with Benchmark(
        trace_set, cfg, on_event=(events.append if events is not None else None)
    ) as bench:
        for name in names:
            traces += bench.run_solution(by_name[name], dump_traces=True)
    return traces


@pytest.fixture
def tagged_env(monkeypatch):
    tag = uuid.uuid4().hex
    monkeypatch.setenv("HOSTILE_TAG", tag)
    return tag


@pytest.mark.slow
@pytest.mark.parametrize("isolated", [False, True], ids=["persistent", "isolated"])
def test_hostile_corpus_is_contained(tmp_path, isolated, tagged_env):
    contained = namespaces_available()
    # Without namespaces nothing stops a solution from rewriting the dataset (the run warns);
    # the cache is still protected by its signatures.
    hostile = [n for n in [*ATTACKS, *HARMLESS]
               if contained or n not in ("rewrite_dataset", "rewrite_kit", "plant_module")]
    root = _dataset(tmp_path / "dataset", ["correct", "wrong", "expects_clean_process", *hostile])
    # An honest baseline: traces stored, references and their latency cached.
    before = {t.solution: t for t in _run(root, ["correct", "wrong"], isolated)}
    assert before["correct"].evaluation.status.value == "PASSED"
    assert before["wrong"].evaluation.status.value == "INCORRECT_NUMERICAL"
    stored = {p: p.read_bytes() for p in (root / "traces").rglob("*.jsonl")}
    workloads = _digests(root / "workloads")
    cache = Path(os.environ["FIB_CACHE_DIR"]) / "reference"
    cached = _digests(cache)
    ref_ms = before["correct"].evaluation.performance.reference_latency_ms

    events: list = []
    # Each attacker is followed by honest solutions, so damage left in the worker would show.
    order = []
    for name in hostile:
        order += [name, "wrong", "expects_clean_process"]
    traces = _run(root, order, isolated, events)
    kit = Path(fib_core.__file__).parent
    planted = [kit / "_hostile_was_here.py", kit.parent / "_hostile_planted.py"]
    try:  # the kit's own code, and the fork's root the next run imports from, are as they were
        assert not [p for p in planted if p.exists()], "a solution wrote into the fork"
    finally:
        for path in planted:
            path.unlink(missing_ok=True)
    results = {}
    for i, name in enumerate(hostile):
        attacker, wrong, honest = traces[3 * i : 3 * i + 3]
        results[name] = attacker
        assert wrong.evaluation.status.value == "INCORRECT_NUMERICAL", name
        assert honest.evaluation.status.value == "PASSED", (name, honest.evaluation.log)
    assert _tagged(tagged_env) == [], "processes left behind"

    sandbox_notes = [e.message for e in events if isinstance(e, Log) and "sandbox" in e.message]
    assert bool(sandbox_notes) != contained, sandbox_notes
    for name, (statuses, needle) in ATTACKS.items():
        if name not in results:
            continue
        ev = results[name].evaluation
        assert ev.status.value in statuses, (name, ev.status.value, ev.log[:2000])
        if needle is not None:
            assert needle in ev.log, (name, ev.log[:2000])
        assert len(ev.log) < 64 << 10, name
    for name in HARMLESS:
        ev = results[name].evaluation
        assert ev.status.value == "PASSED", (name, ev.log)
    assert any("working directory" in w for w in results["chdir_env"].evaluation.extra["warnings"])

    # Stored traces: the earlier records are byte-for-byte where they were (new ones appended).
    for path, data in stored.items():
        assert path.read_bytes().startswith(data), path
    for line in (root / "traces").rglob("*.jsonl"):
        records = [json.loads(x) for x in line.read_text().splitlines() if x.strip()]
        first = {(r["solution"], r["evaluation"]["status"]) for r in records[:2]}
        assert first == {("correct", "PASSED"), ("wrong", "INCORRECT_NUMERICAL")}
    assert _digests(root / "workloads") == workloads
    after = _digests(cache)
    if contained:
        assert {k: after.get(k) for k in cached} == cached  # new entries may appear
    again = _run(root, ["correct"], isolated)[0].evaluation
    if contained:  # the cached latency itself was out of reach
        assert again.performance.reference_latency_ms == pytest.approx(ref_ms)
    else:  # rewritten to 1000 ms, rejected by its signature and measured again
        assert again.performance.reference_latency_ms < 100
    assert _tagged(tagged_env) == []


def test_a_solution_importing_torch_dynamo_keeps_its_worker(tmp_path, tagged_env):
    """Importing torch._dynamo (torch.compile does) rebinds torch.manual_seed; that is torch's
    doing, not the solution's: no tampering warning, and one worker serves both workloads."""
    root = _dataset(tmp_path / "dataset", ["imports_dynamo"])
    cfg = BenchmarkConfig(solutions=("imports_dynamo",), **FAST)
    events: list = []
    with Benchmark(TraceSet.from_path(root), cfg, on_event=events.append) as bench:
        traces = bench.run_all(dump_traces=False)
    assert [t.evaluation.status.value for t in traces] == ["PASSED", "PASSED"]
    for trace in traces:
        assert not trace.evaluation.extra.get("warnings"), trace.evaluation.extra
    replaced = [e.message for e in events if isinstance(e, Log) and "replacing" in e.message]
    assert replaced == []
    assert _tagged(tagged_env) == []


def test_a_patched_checker_gains_nothing_on_any_workload(tmp_path, tagged_env):
    root = _dataset(tmp_path / "dataset", ["patch_checker"])
    cfg = BenchmarkConfig(solutions=("patch_checker",), **FAST)
    with Benchmark(TraceSet.from_path(root), cfg) as bench:
        traces = bench.run_all(dump_traces=False)
    # The patched checker and evaluator gain nothing: the worker's PASSED claims have no
    # verdict of the judge behind them (RUNTIME_ERROR), or the outputs fail there.
    statuses = [t.evaluation.status.value for t in traces]
    assert len(statuses) == 2
    assert set(statuses) <= {"RUNTIME_ERROR", "INCORRECT_NUMERICAL"}, statuses
    assert any("patches fib_core" in f for f in traces[0].evaluation.extra["audit"])
    assert _tagged(tagged_env) == []


_KILL_SCRIPT = """
import sys
from fib_core.bench import Benchmark, BenchmarkConfig
from fib_core.data.traceset import TraceSet
cfg = BenchmarkConfig(device=sys.argv[2], timeout_seconds=600, warmup_runs=1, iterations=3,
                      num_trials=2, solutions=("spawn_then_hang",))
with Benchmark(TraceSet.from_path(sys.argv[1]), cfg) as bench:
    bench.run_all(dump_traces=False)
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_nothing_outlives_a_killed_engine(tmp_path, tagged_env, how):
    root = _dataset(tmp_path / "dataset", [])
    spec = _solution("spawn_children")
    spec["name"] = "spawn_then_hang"
    spec["sources"][0]["content"] = spec["sources"][0]["content"].replace(
        "    out.copy_(alpha * x + y)", "    import time\n    time.sleep(3600)"
    )
    folder = root / "solutions" / "tests" / "toy_axpy"
    (folder / "spawn_then_hang.json").write_text(json.dumps(spec))
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]))
    engine = subprocess.Popen([sys.executable, "-c", _KILL_SCRIPT, str(root), DEVICE], env=env)
    try:
        deadline = time.monotonic() + 120
        while len(_tagged(tagged_env)) < 5 and time.monotonic() < deadline:
            time.sleep(0.5)  # engine, judge, worker (two with a PID namespace), sleepers
        assert len(_tagged(tagged_env)) >= 4
        engine.send_signal(how)
        engine.wait(timeout=30)
        deadline = time.monotonic() + 20
        while _tagged(tagged_env) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _tagged(tagged_env) == []
    finally:
        if engine.poll() is None:
            engine.kill()
