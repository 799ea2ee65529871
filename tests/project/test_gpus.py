"""Several GPUs: choosing them, spreading workloads by cost, merging in order (fake devices)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fib_core.errors import ConfigError, FibError
from fib_core.project.gpus import (
    _PRESTARTED,
    _early_device_ids,
    parse_gpus,
    physical_ids,
    plan_shards,
    prestart,
    run_on_gpus,
    spread_by_cost,
    visible_gpu_count,
    workload_costs,
)
from fib_core.project.runflow import RunRequest, ShardResult, merge_shards

DECODE = "gdn_decode_qk4_v8_d128_k_last"


def test_parse_gpus() -> None:
    assert parse_gpus(None, 2) == [0, 1]
    assert parse_gpus("all", 3) == [0, 1, 2]
    assert parse_gpus("1", 2) == [1]
    assert parse_gpus("1, 0,1", 2) == [1, 0]
    for text, needle in (
        ("2", "GPU 2 does not exist"),
        ("a", "'a' is not a GPU index"),
        (",", "at least one"),
    ):
        with pytest.raises(ConfigError, match=needle) as info:
            parse_gpus(text, 2)
        assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="no CUDA GPU"):
        parse_gpus(None, 0)


def test_physical_ids_follow_the_parents_visible_list() -> None:
    assert physical_ids([0, 1], {}) == ["0", "1"]
    assert physical_ids([1], {"CUDA_VISIBLE_DEVICES": "4, 5"}) == ["5"]


def test_spread_balances_cost_and_keeps_dataset_order() -> None:
    costs = [9.0, 1.0, 1.0, 5.0, 4.0, 1.0, 3.0]
    groups = spread_by_cost(costs, 2)
    assert sorted(i for g in groups for i in g) == list(range(len(costs)))
    assert all(g == sorted(g) for g in groups)
    loads = [sum(costs[i] for i in g) for g in groups]
    assert loads == [12.0, 12.0]
    assert spread_by_cost(costs, 1) == [list(range(7))]
    assert spread_by_cost([1.0], 3) == [[0], [], []]


def test_costs_grow_with_the_workload_and_default_to_equal() -> None:
    small, big = workload_costs(DECODE, [{"batch_size": 1}, {"batch_size": 64}])
    assert 1.0 <= small < big
    assert workload_costs("no_such_definition", [{}, {}]) == [1.0, 1.0]


def _request() -> RunRequest:
    return RunRequest(solution={}, definition=DECODE, filters=None, quick=False, engine={})


def _trace(uuid: str) -> dict:
    return {
        "definition": DECODE,
        "solution": "s",
        "evaluation": None,
        "workload": {"uuid": uuid, "axes": {"batch_size": 1}, "inputs": {}},
    }


def test_plans_cover_the_selection_and_merge_back_in_order() -> None:
    uuids = [f"w{i}" for i in range(7)]
    plans = plan_shards(_request(), uuids, [9.0, 1.0, 1.0, 5.0, 4.0, 1.0, 3.0], [0, 1])
    assert [p.shard for p in plans] == [0, 1] and all(p.num_shards == 2 for p in plans)
    assert sorted(u for p in plans for u in p.assigned) == uuids
    # shards finish in any order, each with its traces in its own order
    shards = [
        ShardResult(p.shard, uuids, [_trace(u) for u in reversed(p.assigned)], "cuda", "GPU")
        for p in reversed(plans)
    ]
    traces, first = merge_shards(shards)
    assert [t.workload.uuid for t in traces] == uuids


FAKE_EXECUTE = """
import os
from fib_core.bench.events import Log
from fib_core.project.runflow import ShardResult


def fake_execute(request, on_event=None):
    device = os.environ["CUDA_VISIBLE_DEVICES"]
    on_event(Log(f"shard {request.shard} on {device}", "info"))
    if request.definition == "broken":
        from fib_core.errors import ConfigError
        raise ConfigError("config.toml: [solution] definition = 'broken' is not in the dataset")
    traces = [{"definition": request.definition, "solution": "s", "evaluation": None,
               "workload": {"uuid": u, "axes": {}, "inputs": {}}} for u in request.assigned]
    return ShardResult(request.shard, ["w0", "w1", "w2"], traces, "cuda", "Fake GPU",
                       messages=[device])
"""


@pytest.fixture
def fake_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "fake_gpu_target.py").write_text(textwrap.dedent(FAKE_EXECUTE))
    monkeypatch.syspath_prepend(str(tmp_path))
    import fake_gpu_target

    return fake_gpu_target.fake_execute


def test_one_process_per_gpu_with_its_device_and_events_forwarded(fake_target) -> None:
    plans = plan_shards(_request(), ["w0", "w1", "w2"], [1.0, 5.0, 1.0], [0, 1])
    events: list = []
    shards = run_on_gpus(plans, ["3", "7"], on_event=events.append, target=fake_target)
    assert [s.shard for s in shards] == [0, 1]
    assert [s.messages for s in shards] == [["3"], ["7"]]  # each child saw only its GPU
    assert sorted(e.message for e in events) == ["shard 0 on 3", "shard 1 on 7"]
    traces, _ = merge_shards(shards)
    assert [t.workload.uuid for t in traces] == ["w0", "w1", "w2"]


def test_a_user_error_in_a_child_is_one_line(fake_target) -> None:
    plans = plan_shards(
        RunRequest(solution={}, definition="broken", filters=None, quick=False, engine={}),
        ["w0"],
        [1.0],
        [0],
    )
    with pytest.raises(FibError, match="GPU 0: config.toml") as info:
        run_on_gpus(plans, ["0"], target=fake_target)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("listed", "count"),
    [("0,1", 2), ("3", 1), ("", 0), ("-1", 0), ("0,-1,2", 1), ("GPU-abc,GPU-def", 2)],
)
def test_visible_gpus_are_read_from_cuda_visible_devices(
    monkeypatch: pytest.MonkeyPatch, listed: str, count: int
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", listed)
    assert visible_gpu_count() == count


@pytest.mark.parametrize(
    ("listed", "gpus", "ids"),
    [
        ("0,1", None, [0, 1]),  # every visible GPU: one process each
        ("0", None, None),  # one GPU: the run stays in the launcher's process
        ("0,1", "1", [1]),  # named: its own process, as the run will have
        ("0,1", "5", None),  # a wrong --gpus: the run says what is wrong
        ("", None, None),  # no GPU
    ],
)
def test_which_gpus_get_a_process_before_the_run(
    monkeypatch: pytest.MonkeyPatch, listed: str, gpus: str | None, ids: list[int] | None
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", listed)
    assert _early_device_ids(gpus) == ids


def test_prestarted_processes_serve_the_run_on_their_gpus(fake_target) -> None:
    prestart(["3", "7"], "cuda", None, target=fake_target)
    waiting = _PRESTARTED[0]
    plans = plan_shards(_request(), ["w0", "w1", "w2"], [1.0, 5.0, 1.0], [0, 1])
    shards = run_on_gpus(plans, ["3", "7"], target=fake_target)
    assert [s.messages for s in shards] == [["3"], ["7"]]
    assert not _PRESTARTED  # taken by the run
    assert all(p.exitcode == 0 for p in waiting.procs)  # the very processes started before


def test_prestarted_processes_on_other_gpus_are_stopped(fake_target) -> None:
    prestart(["3", "7"], "cuda", None, target=fake_target)
    waiting = _PRESTARTED[0]
    plans = plan_shards(_request(), ["w0", "w1"], [1.0, 1.0], [0])
    shards = run_on_gpus(plans, ["5"], target=fake_target)
    assert [s.messages for s in shards] == [["5"]]
    assert not _PRESTARTED
    assert all(p.exitcode == 0 for p in waiting.procs)  # told to go, went


LAUNCHER = """
import os, sys
sys.path[:0] = [{root!r}, {fake!r}]
import fake_gpu_target
from fib_core.project.gpus import _PRESTARTED, prestart

if __name__ == "__main__":
    prestart(["0", "1"], "cuda", None, target=fake_gpu_target.fake_execute)
    print(" ".join(str(p.pid) for p in _PRESTARTED[0].procs), flush=True)
    if sys.argv[1] == "killed":
        os.kill(os.getpid(), 9)
    raise SystemExit("config.toml: a mistake found before the run")
"""


@pytest.mark.parametrize("end", ["error", "killed"])
def test_prestarted_processes_end_with_their_launcher(
    fake_target, tmp_path: Path, end: str
) -> None:
    """A launcher that stops before its run (a user error, or killed) leaves no GPU process
    behind, and does not hang waiting for them."""
    import os
    import subprocess
    import sys
    import time

    script = tmp_path / "launcher.py"
    root = str(Path(__file__).resolve().parents[2])
    script.write_text(LAUNCHER.format(root=root, fake=str(tmp_path)))
    done = subprocess.run([sys.executable, str(script), end], capture_output=True, text=True,
                          timeout=60)
    pids = [int(p) for p in done.stdout.split()]
    assert len(pids) == 2, done.stderr
    deadline = time.monotonic() + 10
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in pids if _running(p)]
        time.sleep(0.1)
    assert not alive, f"GPU processes {alive} outlived their launcher ({end})"
    assert os.getpid() not in pids


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False
