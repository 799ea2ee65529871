"""Several GPUs: choosing them, one shared queue of workloads, merging in order (fake devices)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from fib_core.bench.engine import gpu_processes, gpus
from fib_core.bench.engine.gpus import (
    _early_device_ids,
    parse_gpus,
    physical_ids,
    plan_queue,
    run_on_gpus,
    visible_gpu_count,
    workload_costs,
)
from fib_core.bench.engine.shard_run import RunRequest, ShardResult
from fib_core.errors import ConfigError, FibError
from fib_core.project.run_finish import merge_shards

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


def _selection(uuids: list[str], sizes: list[int] | None = None) -> list:
    """Workload records as a run selects them (decode's batch size sets their cost)."""
    from types import SimpleNamespace

    sizes = sizes if sizes is not None else [1] * len(uuids)
    return [SimpleNamespace(workload=SimpleNamespace(uuid=u, axes={"batch_size": b}))
            for u, b in zip(uuids, sizes, strict=True)]


def _plan(uuids: list[str], gpus: int = 2, request: RunRequest | None = None,
          sizes: list[int] | None = None) -> gpus.QueuePlan:
    return plan_queue(request or _request(), _selection(uuids, sizes), gpus)


def test_the_plan_queues_the_selection_in_size_order_for_every_gpu() -> None:
    uuids = [f"w{i}" for i in range(7)]
    plan = _plan(uuids, sizes=[64, 1, 1, 16, 8, 2, 32])
    assert [r.shard for r in plan.requests] == [0, 1]
    assert all(r.num_shards == 2 for r in plan.requests)
    assert all(r.queue == [1, 2, 5, 4, 3, 6, 0] for r in plan.requests)  # positions
    assert plan.lanes == [(0, 7)]  # two GPUs share one lane, from its two ends
    assert _plan(uuids, gpus=1).requests[0].queue == list(range(7))  # alone: dataset order
    # shards finish in any order, each with its traces in its own order
    order = [uuids[i] for i in plan.requests[0].queue]
    shards = [ShardResult(1, uuids, [_trace(u) for u in order[4:][::-1]], "cuda", "GPU"),
              ShardResult(0, uuids, [_trace(u) for u in order[:4]], "cuda", "GPU")]
    traces, first = merge_shards(shards)
    assert [t.workload.uuid for t in traces] == uuids


FAKE_EXECUTE = """
import os
import time
from fib_core.bench.events import Log
from fib_core.bench.engine.shard_run import ShardResult


def fake_execute(request, on_event=None, queue=None):
    device = os.environ["CUDA_VISIBLE_DEVICES"]
    on_event(Log(f"shard {request.shard} on {device}", "info"))
    print(f"printed by shard {request.shard}")  # a library's or a kernel's output
    if request.definition == "GPU 0 dies" and request.shard == 0:
        os._exit(3)  # as a crash would: no report at all
    if request.definition == "GPU 0 dies, its helper lives" and request.shard == 0:
        import subprocess  # a library's process that keeps every inherited fd
        subprocess.Popen(["sleep", "8"], close_fds=False)
        os._exit(3)
    if request.definition == "broken" or (request.definition == "GPU 0 fails"
                                          and request.shard == 0):
        from fib_core.errors import ConfigError
        raise ConfigError("config.toml: [solution] definition = 'broken' is not in the dataset")
    traces = []
    while (index := queue.take()) is not None:
        traces.append({"definition": request.definition, "solution": "s", "evaluation": None,
                       "workload": {"uuid": f"w{request.queue[index]}", "axes": {},
                                    "inputs": {}}})
        time.sleep(0.05)  # a workload's time: the other GPU takes its share meanwhile
    if os.environ.get("FAKE_COUNT_DIR"):
        with open(os.path.join(os.environ["FAKE_COUNT_DIR"], f"shard{request.shard}"), "w") as f:
            f.write(str(len(traces)))
    order = [f"w{i}" for i in range(len(request.queue))]  # the selection: w0, w1, ...
    return ShardResult(request.shard, order, traces, "cuda", "Fake GPU",
                       messages=[device])
"""


@pytest.fixture
def fake_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "fake_gpu_target.py").write_text(textwrap.dedent(FAKE_EXECUTE))
    monkeypatch.syspath_prepend(str(tmp_path))
    import fake_gpu_target

    return fake_gpu_target.fake_execute


def test_one_process_per_gpu_with_its_device_and_events_forwarded(fake_target) -> None:
    uuids = [f"w{i}" for i in range(6)]
    plan = _plan(uuids, sizes=[1, 2, 4, 8, 16, 32])
    events: list = []
    shards = run_on_gpus(plan, ["3", "7"], on_event=events.append, run_shard=fake_target)
    assert [s.shard for s in shards] == [0, 1]
    assert [s.messages for s in shards] == [["3"], ["7"]]  # each child saw only its GPU
    assert sorted(e.message for e in events) == ["shard 0 on 3", "shard 1 on 7"]
    # both took from the shared queue, from its two ends (how far each got depends on when
    # each process was ready), and no workload ran twice
    ran = [[t.workload.uuid for t in s.traces] for s in shards]
    assert sorted(ran[0] + ran[1]) == uuids
    assert ran[0] == uuids[:len(ran[0])] and ran[1] == uuids[len(ran[0]):][::-1]
    traces, _ = merge_shards(shards)
    assert [t.workload.uuid for t in traces] == uuids


def test_a_user_error_in_a_child_is_one_line(fake_target) -> None:
    plan = _plan(["w0"], gpus=1, request=RunRequest(
        solution={}, definition="broken", filters=None, quick=False, engine={}))
    with pytest.raises(FibError, match="GPU 0: config.toml") as info:
        run_on_gpus(plan, ["0"], run_shard=fake_target)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("how", "message"), [("fails", "GPU 3: config.toml"),
                                              ("dies", "ended without a result"),
                                              ("dies, its helper lives", "ended without")])
def test_one_gpu_failing_ends_the_run_without_the_rest_of_the_queue(
    fake_target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, message: str
) -> None:
    monkeypatch.setenv("FAKE_COUNT_DIR", str(tmp_path))
    request = RunRequest(solution={}, definition=f"GPU 0 {how}", filters=None, quick=False,
                         engine={})
    uuids = [f"w{i}" for i in range(100)]  # 5 s for the other GPU alone
    with pytest.raises(FibError, match=message):
        run_on_gpus(_plan(uuids, request=request), ["3", "7"], run_shard=fake_target)
    ran = int((tmp_path / "shard1").read_text())
    assert ran < 60  # it took no workload once the failure was in


def test_a_failing_event_callback_stops_the_gpu_processes_at_once(
    fake_target, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher's own failure (an interrupt, a callback raising, as printing to a closed
    pipe does) ends its GPU processes now, instead of leaving them to run their queue until
    close's 30 s deadline: neither gets to the end of its share."""
    monkeypatch.setenv("FAKE_COUNT_DIR", str(tmp_path))
    uuids = [f"w{i}" for i in range(200)]  # 5 s for each GPU

    def on_event(event) -> None:
        raise BrokenPipeError("stdout closed")

    with pytest.raises(BrokenPipeError):
        run_on_gpus(_plan(uuids), ["3", "7"], on_event=on_event, run_shard=fake_target)
    assert not list(tmp_path.glob("shard*"))  # a child that ran to its end writes its count


LAUNCH_AND_PRINT = """
import sys
sys.path[:0] = [{root!r}, {fake!r}]
import fake_gpu_target
from fib_core.bench.engine import gpus
from fib_core.bench.engine.shard_run import RunRequest
from types import SimpleNamespace

if __name__ == "__main__":
    request = RunRequest(solution={{}}, definition="d", filters=None, quick=False, engine={{}})
    selection = [SimpleNamespace(workload=SimpleNamespace(uuid="w0", axes={{}}))]
    gpus.run_on_gpus(gpus.plan_queue(request, selection, 2), ["0", "1"],
                     run_shard=fake_gpu_target.fake_execute)
"""


def test_what_a_gpu_process_prints_reaches_a_pipe(fake_target, tmp_path: Path) -> None:
    """Its stdout is block-buffered there; leaving without teardown must not drop it."""
    import subprocess
    import sys

    script = tmp_path / "launcher.py"
    root = str(Path(__file__).resolve().parents[2])
    script.write_text(LAUNCH_AND_PRINT.format(root=root, fake=str(tmp_path)))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "printed by shard 0" in out.stdout and "printed by shard 1" in out.stdout


@pytest.fixture
def cuda_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine with a CUDA build of torch and no NVIDIA driver folder to count."""
    monkeypatch.setattr(gpus, "_torch_has_cuda", lambda: True)
    monkeypatch.setattr(gpus, "_installed_gpus", lambda: None)


@pytest.mark.parametrize(
    ("listed", "count"),
    [
        ("0,1", 2),
        ("3", 1),
        ("", 0),
        ("-1", 0),
        ("0,-1,2", 1),  # up to the first entry that is not a device
        ("0,1,foo", 2),
        ("1a,2", 2),  # an ordinal is the entry's leading number
        ("0,0", 0),  # a repeated device: none
        ("GPU-abc,GPU-def", 2),
        ("GPU-a,GPU-a", 0),
        ("GPU-abc,0", 1),  # identifiers of the first entry's kind only
    ],
)
def test_visible_gpus_are_read_from_cuda_visible_devices_as_cuda_reads_it(
    monkeypatch: pytest.MonkeyPatch, cuda_torch: None, listed: str, count: int
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", listed)
    assert visible_gpu_count() == count


def test_visible_gpus_are_at_most_the_installed_ones_and_none_for_a_cpu_torch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gpus, "_torch_has_cuda", lambda: True)
    monkeypatch.setattr(gpus, "_installed_gpus", lambda: 1)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert visible_gpu_count() == 1
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_gpu_count() == 1
    monkeypatch.setattr(gpus, "_torch_has_cuda", lambda: False)  # runs on the CPU
    assert visible_gpu_count() is None


def test_the_torch_build_is_read_without_importing_it() -> None:
    import torch

    assert gpus._torch_has_cuda() == (torch.version.cuda is not None)


@pytest.mark.parametrize(
    ("listed", "choice", "ids"),
    [
        ("0,1", None, [0, 1]),  # every visible GPU: one process each
        ("0", None, None),  # one GPU: the run stays in the launcher's process
        ("0,1", "1", [1]),  # named: its own process, as the run will have
        ("0,1", "5", None),  # a wrong --gpus: the run says what is wrong
        ("", None, None),  # no GPU
    ],
)
def test_which_gpus_get_a_process_before_the_run(
    monkeypatch: pytest.MonkeyPatch, cuda_torch: None, listed: str, choice: str | None,
    ids: list[int] | None,
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", listed)
    assert _early_device_ids(choice) == ids


def _prestarted(fake_target, ids=("3", "7")) -> gpus.ShardProcesses:
    gpus.prestart(list(ids), "auto", None, run_shard=fake_target)
    assert gpus._prestarted is not None
    return gpus._prestarted


@pytest.mark.parametrize(
    ("device", "choice", "counted", "ids"),
    [
        ("cpu", None, 0, None),  # a CPU run stays in the launcher's process
        ("cuda", None, 1, None),  # so does one GPU that nobody named
        ("cuda", None, 2, ["4", "5"]),  # every visible GPU, named as the parent's list names it
        ("cuda", "1", 2, ["5"]),  # a named GPU gets a process of its own, even alone
    ],
)
def test_a_run_takes_one_process_per_gpu_or_stays_in_the_launcher(
    fake_target, monkeypatch: pytest.MonkeyPatch, device: str, choice: str | None,
    counted: int, ids: list[str] | None,
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: counted)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    waiting = _prestarted(fake_target)
    assert gpus.gpus_for_run(device, choice) == ids
    if ids is None:  # the run stays here: the GPU processes started for it are stopped
        assert gpus._prestarted is None
        assert not any(p.is_alive() for p in waiting.procs)
    else:  # left for run_on_gpus, which takes them if they fit
        assert gpus._prestarted is waiting
        gpus.discard_prestarted()
    with pytest.raises(ConfigError, match="--gpus needs a CUDA GPU"):
        gpus.gpus_for_run("cpu", "0")


def test_prestarted_processes_serve_the_run_on_their_gpus(fake_target) -> None:
    waiting = _prestarted(fake_target)
    shards = run_on_gpus(_plan(["w0", "w1", "w2"]), ["3", "7"], run_shard=fake_target)
    assert [s.messages for s in shards] == [["3"], ["7"]]
    assert gpus._prestarted is None  # taken by the run
    assert all(p.exitcode == 0 for p in waiting.procs)  # the very processes started before


def test_a_second_prestart_with_the_same_settings_keeps_the_waiting_processes(
    fake_target,
) -> None:
    """A watch whose run failed before it took them (a typo in config.toml) starts the same
    processes again: those still waiting stay, and nothing boots twice."""
    waiting = _prestarted(fake_target)
    pids = [p.pid for p in waiting.procs]
    assert _prestarted(fake_target) is waiting
    assert [p.pid for p in gpus._prestarted.procs] == pids
    assert all(p.is_alive() for p in waiting.procs)
    waiting.procs[1].kill()  # one died meanwhile: all are started anew
    waiting.procs[1].join()
    fresh = _prestarted(fake_target)
    assert fresh is not waiting and not any(p.is_alive() for p in waiting.procs)
    assert _prestarted(fake_target, ids=("3",)) is not fresh  # other GPUs: others
    assert not any(p.is_alive() for p in fresh.procs)


@pytest.mark.parametrize("change", ["gpus", "cache folder", "dataset"])
def test_prestarted_processes_that_do_not_fit_the_run_are_stopped(
    fake_target, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: str
) -> None:
    waiting = _prestarted(fake_target)
    request, ids = _request(), ["3", "7"]
    if change == "gpus":
        ids = ["5"]
    elif change == "cache folder":  # the children took the old one at start
        monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "another-cache"))
    else:
        request.dataset_path = str(tmp_path)
    plan = _plan(["w0", "w1"], gpus=len(ids), request=request)
    shards = run_on_gpus(plan, ids, run_shard=fake_target)
    assert [s.messages for s in shards] == [[i] for i in ids]  # new processes ran it
    assert gpus._prestarted is None
    assert all(p.exitcode not in (0, None) for p in waiting.procs)  # stopped, not served


def test_a_request_that_cannot_be_sent_fails_at_once_and_stops_the_processes(
    fake_target,
) -> None:
    import threading

    waiting = _prestarted(fake_target)
    plan = _plan(["w0", "w1"])
    plan.requests[0].engine["extra"] = {"lock": threading.Lock()}  # not picklable
    with pytest.raises(TypeError, match="pickle"):
        run_on_gpus(plan, ["3", "7"], run_shard=fake_target)
    assert not any(p.is_alive() for p in waiting.procs)


def test_a_failed_start_stops_the_processes_already_started(
    fake_target, monkeypatch: pytest.MonkeyPatch
) -> None:
    from multiprocessing.context import SpawnProcess

    started: list = []
    real_start = SpawnProcess.start

    def start(self) -> None:
        if started:
            raise OSError(11, "Resource temporarily unavailable")
        real_start(self)
        started.append(self)

    monkeypatch.setattr(SpawnProcess, "start", start)
    with pytest.raises(OSError, match="temporarily"):
        gpus.ShardProcesses(["3", "7"], "auto", None, run_shard=fake_target)
    assert len(started) == 1 and not started[0].is_alive()


LAUNCHER = """
import os, sys, time
sys.path[:0] = [{root!r}, {fake!r}]
import fake_gpu_target
from fib_core.bench.engine import gpus

def started_by(parents):
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{{entry}}/cmdline", "rb") as f:
                args = f.read().split(b"\\0")
        except OSError:
            continue
        if any(a == b"--parent" and b.decode() in parents for a, b in zip(args, args[1:])):
            found.append(entry)
    return found

if __name__ == "__main__":
    real = sys.argv[2] == "real"  # each process boots a CPU judge and worker, as a run would
    if real:  # the engine's own one-shard run
        gpus.prestart(["0", "1"], "cpu", None)
    else:
        gpus.prestart(["0", "1"], "cpu", None, run_shard=fake_gpu_target.fake_execute)
    children = [str(p.pid) for p in gpus._prestarted.procs]
    print(" ".join(children), flush=True)
    if sys.argv[3] == "started":  # until a judge or worker of each process is up
        deadline = time.monotonic() + 120
        while len(started_by(children)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        print(" ".join(started_by(children)), flush=True)
    else:
        time.sleep(float(sys.argv[3]))  # the processes are still booting
    if sys.argv[1] == "killed":
        os.kill(os.getpid(), 9)
    raise SystemExit("config.toml: a mistake found before the run")
"""


@pytest.mark.parametrize(
    ("end", "boot", "wait"),
    [
        ("error", "fake", "0.0"),
        ("killed", "fake", "0.0"),
        # stopped while starting, once their judges and workers are up (however long that
        # takes on a loaded machine), and after waiting
        ("error", "real", "0.3"),
        ("error", "real", "started"),
        ("error", "real", "6.0"),
        ("killed", "real", "0.3"),
        ("killed", "real", "started"),
    ],
)
def test_prestarted_processes_end_with_their_launcher(
    fake_target, tmp_path: Path, end: str, boot: str, wait: str
) -> None:
    """A launcher that stops before its run (a user error, or killed) leaves no process
    behind (its GPU processes, their judges and workers) and no log folder, and does not
    wait for processes still booting."""
    import os
    import subprocess
    import sys
    import time

    script = tmp_path / "launcher.py"
    root = str(Path(__file__).resolve().parents[2])
    script.write_text(LAUNCHER.format(root=root, fake=str(tmp_path)))
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    launcher = subprocess.Popen([sys.executable, str(script), end, boot, wait],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                env=env)
    children = [int(p) for p in launcher.stdout.readline().split()]
    assert len(children) == 2
    family = set(children)
    if wait == "started":  # the launcher saw them: the case the test is about did happen
        grandchildren = {int(p) for p in launcher.stdout.readline().split()}
        assert len(grandchildren) >= 2, "no judge or worker started within 120 s"
        family |= grandchildren
    deadline = time.monotonic() + 60
    while launcher.poll() is None and time.monotonic() < deadline:
        family |= _started_by(children)  # their judges and workers, as they appear
        time.sleep(0.05)
    assert launcher.poll() is not None, "the launcher waited for its GPU processes"
    deadline = time.monotonic() + 20
    alive = family
    while alive and time.monotonic() < deadline:
        alive = {p for p in family if _running(p)}
        time.sleep(0.1)
    assert not alive, f"processes {sorted(alive)} outlived their launcher ({end}, {boot} boot)"
    assert not list(temp.glob("fib-bench-logs-*")), "a log folder was left behind"


def _started_by(parents: list[int]) -> set[int]:
    """Processes whose command line names one of ``parents`` as ``--parent``."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        for i, arg in enumerate(args[:-1]):
            if arg == b"--parent" and args[i + 1].decode(errors="replace") in map(str, parents):
                found.add(int(entry))
    return found


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_events_of_several_gpus_are_numbered_as_one_run() -> None:
    from fib_core.bench.events import (
        Log,
        SolutionStarted,
        WorkloadFinished,
        WorkloadSkipped,
        WorkloadStarted,
    )

    seen: list = []
    forward = gpu_processes._numbered(seen.append)
    for event in [
        SolutionStarted("s", DECODE, 4), SolutionStarted("s", DECODE, 4),  # each GPU announces
        WorkloadStarted("a", 0, 4), WorkloadStarted("d", 0, 4),
        WorkloadFinished(None, 0, 4), Log("x"), WorkloadSkipped("e", "s", 1, 4),
        WorkloadStarted("b", 1, 4), WorkloadFinished(None, 0, 4), WorkloadFinished(None, 1, 4),
    ]:
        forward(event)
    assert [type(e).__name__ for e in seen].count("SolutionStarted") == 1
    assert [e.index for e in seen if isinstance(e, WorkloadStarted)] == [0, 1, 2]
    ended = [e.index for e in seen if isinstance(e, WorkloadFinished | WorkloadSkipped)]
    assert ended == [0, 1, 2, 3]
    assert all(e.total == 4 for e in seen if hasattr(e, "total"))
    gpu_processes._numbered(None)(WorkloadStarted("a", 0, 1))  # no callback: nothing to do


def test_the_baseline_after_a_fan_out_sees_only_the_runs_first_gpu(monkeypatch) -> None:
    """The launcher measures the baseline once, after the GPUs' run, on the first GPU it
    named: its processes see that GPU alone (by the parent's own visible list), and the
    launcher's environment is as it was afterwards."""
    from fib_core.project.runflow import _only_gpu

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert gpus.first_gpu("1,0", visible=2) == "5"
    assert gpus.first_gpu(None) is None
    with _only_gpu(gpus.first_gpu("1", visible=2)):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "5"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "4,5"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with _only_gpu("0"):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    with pytest.raises(ConfigError):
        gpus.first_gpu("3", visible=2)
