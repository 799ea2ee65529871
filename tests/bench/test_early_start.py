"""A launcher boots the judge and the first worker ahead of the run; the Benchmark adopts them.

They boot while the launcher imports torch, loads the dataset and packs (seconds on a GPU
machine). Only processes that fit the run (role, device, sandbox paths, checking mode) are
adopted; the rest are killed, and none outlives the launcher.
"""

from __future__ import annotations

import os

import pytest

from fib_core.bench import Benchmark, BenchmarkConfig
from fib_core.bench.engine import judge_process, pool, prestart
from fib_core.data.solution import Solution
from fib_core.data.traceset import TraceSet
from fib_core.paths import kit_root

FAST = dict(warmup_runs=1, iterations=3, num_trials=2, device="cpu")


@pytest.fixture(autouse=True)
def _no_leftovers():
    yield
    prestart.discard_early(remove_logs=True)
    prestart._EARLY_DIRS.clear()


def test_the_benchmark_adopts_the_early_judge_and_worker(make_dataset, toy_solution_json):
    root = make_dataset([])
    prestart.launch_early("cpu", root)
    early = {h.role: h for h in prestart._EARLY}
    assert set(early) == {"worker", "judge"} and all(h.alive for h in early.values())
    solution = Solution.from_dict(toy_solution_json("correct"))
    with Benchmark(TraceSet.from_path(root), BenchmarkConfig(**FAST)) as bench:
        traces = bench.run_solution(solution)
        assert bench._judge is early["judge"] and bench._worker is early["worker"]
        assert bench._workers_started == 1
    assert prestart._EARLY == []  # both adopted
    assert [t.evaluation.status.value for t in traces] == ["PASSED", "PASSED"]
    assert not early["worker"].alive and not early["judge"].alive  # stopped with the run


def test_a_second_launch_with_the_same_settings_keeps_the_waiting_processes(
    make_dataset, tmp_path
):
    """A watch whose run failed before it adopted them launches again: the processes still
    waiting stay (nothing boots twice); a dead one, or other settings, start anew."""
    root = make_dataset([])
    prestart.launch_early("cpu", root)
    first = list(prestart._EARLY)
    prestart.launch_early("cpu", root)
    assert prestart._EARLY == first and all(h.alive for h in first)
    first[0].kill()
    prestart.launch_early("cpu", root)
    assert not set(prestart._EARLY) & set(first) and not any(h.alive for h in first)
    second = list(prestart._EARLY)
    other = tmp_path / "other-dataset"
    other.mkdir()
    prestart.launch_early("cpu", other)  # the worker's sandbox would protect another folder
    assert not set(prestart._EARLY) & set(second) and not any(h.alive for h in second)


def test_an_early_worker_for_another_dataset_is_not_adopted(
    make_dataset, toy_solution_json, tmp_path
):
    """Its sandbox would protect the wrong folder: the run starts its own, and the early one
    is killed as soon as the run finds it does not fit (it holds a CUDA context)."""
    root = make_dataset([])
    other = tmp_path / "other-dataset"
    other.mkdir()
    prestart.launch_early("cpu", other)
    early = {h.role: h for h in prestart._EARLY}
    solution = Solution.from_dict(toy_solution_json("correct"))
    with Benchmark(TraceSet.from_path(root), BenchmarkConfig(**FAST)) as bench:
        bench.run_solution(solution)
        assert bench._worker is not early["worker"]
        assert bench._judge is early["judge"]  # the judge has no sandbox: it fits
    assert prestart._EARLY == [] and not early["worker"].alive


def test_early_processes_on_another_device_kind_are_replaced(make_dataset, toy_solution_json):
    """A process launched for "auto" resolves the device itself; if that is not the run's
    kind, the run kills it and starts its own instead."""
    root = make_dataset([])
    prestart.launch_early("cpu", root)
    early = {h.role: h for h in prestart._EARLY}
    solution = Solution.from_dict(toy_solution_json("correct"))
    with Benchmark(TraceSet.from_path(root), BenchmarkConfig(**FAST)) as bench:
        bench._kind = "cuda"  # pretend the run resolved to a GPU; the early ones say cpu
        bench.run_solution(solution)
        assert bench._worker is not early["worker"] and bench._judge is not early["judge"]
        assert not early["worker"].alive and not early["judge"].alive
        assert bench._workers_started == 1


def test_early_processes_from_another_cache_folder_are_not_adopted(
    make_dataset, toy_solution_json, tmp_path, monkeypatch
):
    """The judge signs and verifies with its cache folder's key and a worker's sandbox guards
    that folder: processes launched under another FIB_CACHE_DIR serve no run; a new launch
    first discards what an earlier one left."""
    root = make_dataset([])
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "first-cache"))
    prestart.launch_early("cpu", root)
    stale = list(prestart._EARLY)
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "second-cache"))
    solution = Solution.from_dict(toy_solution_json("correct"))
    with Benchmark(TraceSet.from_path(root), BenchmarkConfig(**FAST)) as bench:
        bench.run_solution(solution)
        assert bench._judge not in stale and bench._worker not in stale
    # The stale worker was killed when it did not fit; the stale judge waits for the launcher.
    stale_judge = [h for h in stale if h.role == "judge"]
    assert prestart._EARLY == stale_judge and stale_judge[0].alive
    assert not any(h.alive for h in stale if h.role == "worker")
    prestart.launch_early("cpu", root)  # a new launch: the stale judge goes
    assert not any(h.alive for h in stale) and len(prestart._EARLY) == 2


def test_only_a_worker_nothing_runs_beside_makes_its_context_as_it_boots(
    make_dataset, toy_solution_json, monkeypatch
):
    """Launched command lines: the early worker and an isolated run's first worker carry
    --context-at-start; the spare booted beside the timed worker and the judges do not."""
    import subprocess

    launched = []
    real_popen = subprocess.Popen

    def popen(args, **kwargs):
        role = args[args.index("--role") + 1]
        launched.append((role, "--context-at-start" in args))
        return real_popen(args, **kwargs)

    monkeypatch.setattr(pool.subprocess, "Popen", popen)
    root = make_dataset([])
    prestart.launch_early("cpu", root)
    assert sorted(launched) == [("judge", False), ("worker", True)]
    prestart.discard_early()
    launched.clear()
    solution = Solution.from_dict(toy_solution_json("correct"))
    with Benchmark(TraceSet.from_path(root), BenchmarkConfig(**FAST, isolated=True)) as bench:
        traces = bench.run_solution(solution)
        assert bench._spares_used == 1
    assert [t.evaluation.status.value for t in traces] == ["PASSED", "PASSED"]
    workers = [flag for role, flag in launched if role == "worker"]
    assert workers == [True, False]  # the first worker, then the spare for workload 2
    assert [flag for role, flag in launched if role == "judge"] == [False]


def test_an_early_worker_that_does_not_fit_is_killed_at_once(make_dataset):
    """It made its CUDA context while booting: it does not wait for the launcher's exit."""
    root = make_dataset([])
    prestart.launch_early("cpu", root)
    worker = next(h for h in prestart._EARLY if h.role == "worker")
    assert prestart.take_early("worker", "cpu", ["/elsewhere"]) is None
    assert worker not in prestart._EARLY
    worker.proc.wait(timeout=30)
    assert not worker.alive
    assert [h.role for h in prestart._EARLY] == ["judge"]  # not the worker's to decide


def test_the_early_context_is_the_driver_primary_context_of_the_device(monkeypatch):
    """The thread calls the driver API only (cuInit, cuDeviceGet of the device's index,
    cuDevicePrimaryCtxRetain); without a GPU or a driver there is no thread."""
    import ctypes

    from fib_core.bench.evaluation import exchange, head_start

    calls = []

    class Driver:
        def cuInit(self, flags):
            calls.append(("cuInit", flags))
            return 0

        def cuDeviceGet(self, handle, index):
            calls.append(("cuDeviceGet", index))
            ctypes.cast(handle, ctypes.POINTER(ctypes.c_int)).contents.value = 7
            return 0

        def cuDevicePrimaryCtxRetain(self, context, handle):
            calls.append(("cuDevicePrimaryCtxRetain", handle.value))
            return 0

    monkeypatch.setattr(exchange, "cuda_driver", lambda: Driver())
    assert head_start.open_context_early("cpu") is None
    thread = head_start.open_context_early("cuda:1")
    head_start.settle_context("cpu", thread)  # waits for the thread
    assert not thread.is_alive()
    assert calls == [("cuInit", 0), ("cuDeviceGet", 1), ("cuDevicePrimaryCtxRetain", 7)]
    for requested in ("auto", "cuda"):  # what resolve_device makes of them: device 0
        calls.clear()
        thread = head_start.open_context_early(requested)
        thread.join()
        assert calls[1] == ("cuDeviceGet", 0)
    assert head_start.open_context_early("cuda:x") is None
    monkeypatch.setattr(exchange, "cuda_driver", lambda: None)
    assert head_start.open_context_early("cuda:0") is None


def test_a_fib_core_in_the_current_folder_does_not_stand_in_for_the_kits(
        make_dataset, toy_solution_json, tmp_path, monkeypatch):
    """Workers and judges start with ``python -P -m``: a run started from a folder holding
    another copy of fib_core (another fork, an old checkout) still runs this kit's own."""
    root = make_dataset([])
    stale = tmp_path / "elsewhere"
    (stale / "fib_core" / "bench").mkdir(parents=True)
    (stale / "fib_core" / "__init__.py").write_text("raise ImportError('a stale copy')\n")
    # A user module named in generator_modules, in that folder: still found, as before -P.
    (stale / "mygen.py").write_text("import os\nopen(os.environ['MARK'], 'a').write('x')\n")
    monkeypatch.setenv("MARK", str(tmp_path / "imported"))
    monkeypatch.chdir(stale)
    solution = Solution.from_dict(toy_solution_json("correct"))
    config = BenchmarkConfig(**FAST, generator_modules=("mygen",))
    with Benchmark(TraceSet.from_path(root), config) as bench:
        traces = bench.run_solution(solution)
    assert [t.evaluation.status.value for t in traces] == ["PASSED", "PASSED"]
    assert (tmp_path / "imported").read_text().startswith("x")  # in the worker (and judge)


def test_the_current_folder_is_not_on_a_workers_module_path(tmp_path, monkeypatch):
    """A module a solution leaves in the current folder (``json.py``) must not stand in for the
    real one in the next run's judge or worker: the folder is searched only for the modules
    named in generator_modules, while they are imported (test above)."""
    import subprocess

    seen: dict = {}

    class Recorder:
        def __init__(self, args, **kwargs):
            seen.update(args=args, env=kwargs["env"])
            raise OSError("recorded")

    monkeypatch.chdir(tmp_path)
    # An empty or relative entry would mean the current folder (`export PYTHONPATH=$PYTHONPATH:x`)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", "relative", "/abs/lib"]))
    monkeypatch.setattr(subprocess, "Popen", Recorder)
    for role in (pool.WorkerHandle, judge_process.JudgeHandle):
        with pytest.raises(OSError, match="recorded"):
            role("cpu", tmp_path / "logs").launch()
        path = seen["env"]["PYTHONPATH"].split(os.pathsep)
        assert str(tmp_path) not in path and os.getcwd() not in path
        assert path == [str(kit_root()), "/abs/lib"] and seen["args"][1] == "-P"


def test_a_generator_module_that_fails_to_import_fails_every_workload(
        make_dataset, toy_solution_json, tmp_path, monkeypatch):
    """Not only the first: a module whose import failed is not counted as imported."""
    root = make_dataset([])
    monkeypatch.chdir(tmp_path)
    solution = Solution.from_dict(toy_solution_json("correct"))
    config = BenchmarkConfig(**FAST, generator_modules=("no_such_generator_module",))
    with Benchmark(TraceSet.from_path(root), config) as bench:
        traces = bench.run_solution(solution)
    assert [t.evaluation.status.value for t in traces] == ["RUNTIME_ERROR"] * 2
    assert all("no_such_generator_module" in t.evaluation.log for t in traces)
