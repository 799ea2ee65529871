"""The reference is timed as the solution is, as the organizers time both sides.

A speedup is reference latency / solution latency; it compares like with like only if both are
the same quantity. The judge times both with one helper (CUPTI span, runtime and driver tracing
on, which stalls a Python loop's many launches for seconds), so the kit times the reference with
the solution's method, the profiler's span for the judge's CUPTI timer (saying so in the
trace); ``--contest`` uses the judge's own tracing and counts (one input set per trial).
"""

from __future__ import annotations

import pytest
import torch

from fib_core.bench.config import BenchmarkConfig
from fib_core.bench.evaluation import reference_pass
from fib_core.bench.evaluation import timers as timing
from fib_core.bench.evaluation.environment import EnvironmentInfo
from fib_core.bench.evaluation.evaluator import Evaluator
from fib_core.bench.evaluation.timers import TimingResult, choose_method


@pytest.fixture
def timed_methods(monkeypatch, tmp_path):
    """Runs the evaluator's reference step on a pretend GPU; returns the methods measure() got.

    The reference's latency is taken from the calls that compute its checked outputs
    (fib_core.bench.evaluation.reference_sets), so that step is where the method is chosen."""
    seen: list[str] = []

    def fake_measure(call, prepare, *, device, method, warmup, iterations, trials, flusher,
                     estimate=True):
        seen.append(method)
        for i in range(warmup + iterations):
            prepare(i)
            call(i)
        warned = [timing.EVENTS_WARNING] if method == "events" else []  # as measure() does
        return TimingResult(
            1.5, method, [{"median": 1.5}], {"median": 1.5}, warmup, iterations, warned
        )

    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(reference_pass, "measure", fake_measure)
    monkeypatch.setattr(reference_pass, "reference_run", lambda definition: lambda x, y, alpha: alpha * x + y)
    return seen


def _reference_method(toy_definition, toy_workloads, requested: str) -> tuple[str, dict]:
    ev = Evaluator("cpu", EnvironmentInfo(device_kind="cuda", hardware=f"Fake GPU {requested}"))
    ev.kind = "cuda"  # a pretend GPU: tensors stay on the CPU
    ev._get_flusher = lambda: None  # type: ignore[method-assign]
    x = torch.zeros(4)
    cfg = BenchmarkConfig(timing_method=requested, num_input_sets=1, num_trials=1)
    refs, (latency, extra) = ev._references(toy_definition, toy_workloads[0], [[x, x, 1.0]], cfg)
    assert latency == 1.5 and set(refs) == {0}
    return extra["timing_method"], extra


@pytest.mark.parametrize("cupti_installed", [True, False])
@pytest.mark.parametrize("requested", ["auto", "profiler", "cupti", "events"])
def test_reference_is_timed_with_the_solutions_method(
    monkeypatch, timed_methods, toy_definition, toy_workloads, requested, cupti_installed,
):
    """The judge's helper times both sides, so the reference gets the solution's method (the
    profiler's span for the judge's CUPTI timer); a method that is not the judge's says why in
    the reference's trace too."""
    reason = None if cupti_installed else "cupti-python is not installed"
    monkeypatch.setattr(timing, "cupti_unavailable_reason", lambda: reason)
    solution, notes = choose_method(requested, "cuda")  # what _time_solution uses
    method, extra = _reference_method(toy_definition, toy_workloads, requested)
    if solution == "cupti":
        assert timed_methods == ["profiler"] and method == "profiler"
        assert extra["method_note"] == timing.REFERENCE_PROFILER_NOTE
    else:
        assert timed_methods == [solution] and method == solution
        assert extra.get("method_note") == (notes[0] if notes else None)
    assert extra["protocol"] == "one call per set"


def test_contest_times_the_reference_with_the_judges_counts(
    monkeypatch, tmp_path, toy_definition, toy_workloads
):
    """--contest: the judge's CUPTI tracing, per trial one input set, the judge's warm-up and
    iterations; every set the run needs still gets its outputs."""
    seen: list[tuple] = []
    monkeypatch.setattr(timing, "cupti_unavailable_reason", lambda: None)

    def fake_measure(call, prepare, *, device, method, warmup, iterations, trials, flusher,
                     estimate=True):
        seen.append((method, warmup, iterations, trials, estimate))
        for t in range(trials):
            for i in [warmup + t * iterations] * (warmup + 6) + list(
                range(warmup + t * iterations, warmup + (t + 1) * iterations)
            ):
                prepare(i)
                call(i)
        return TimingResult(2.0, method, [{"median": 2.0}], {"median": 2.0}, warmup, iterations)

    alphas: list[float] = []

    def reference(x, y, alpha):
        alphas.append(alpha)
        return alpha * x + y

    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(reference_pass, "measure", fake_measure)
    monkeypatch.setattr(reference_pass, "reference_run", lambda definition: reference)
    ev = Evaluator("cpu", EnvironmentInfo(device_kind="cuda", hardware="Fake GPU"))
    ev.kind = "cuda"
    ev._get_flusher = lambda: None  # type: ignore[method-assign]
    x = torch.zeros(4)
    sets = [[x, x, float(k + 1)] for k in range(5)]
    cfg = BenchmarkConfig(num_input_sets=1, num_trials=2, warmup_runs=3, iterations=4,
                          extra={"reference_protocol": "judge"})
    refs, (latency, extra) = ev._references(toy_definition, toy_workloads[0], sets, cfg)
    assert seen == [("cupti", 3, 4, 2, True)] and latency == 2.0  # the judge's own tracing
    assert extra["protocol"] == "judge"
    assert alphas[:13] == [1.0] * 13 and alphas[13:26] == [2.0] * 13  # one set per trial
    assert sorted(refs) == [0, 1, 2, 3, 4]
    for k, out in refs.items():
        assert torch.equal(out[0], (k + 1.0) * x + x)


def test_reference_on_a_cpu_is_wall_clock(monkeypatch):
    assert timing.reference_method("auto", "cpu") == ("wall-clock", None)


def test_only_a_processs_first_reference_call_is_an_untimed_warm_up(
    monkeypatch, tmp_path, toy_definition, toy_workloads
):
    """Every set the reference computes for its latency is timed; the warm-up (repeating the
    first set, untimed) happens once per process, not once per workload."""
    shapes: list[tuple[int, int]] = []
    calls: list[float] = []

    def fake_measure(call, prepare, *, device, method, warmup, iterations, trials, flusher,
                     estimate=True):
        shapes.append((warmup, iterations))
        for i in range(warmup + iterations):
            prepare(i)
            call(i)
        return TimingResult(1.5, method, [{"median": 1.5}], {"median": 1.5}, warmup, iterations)

    def reference(x, y, alpha):
        calls.append(alpha)
        return alpha * x + y

    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(reference_pass, "measure", fake_measure)
    monkeypatch.setattr(reference_pass, "reference_run", lambda definition: reference)
    ev = Evaluator("cpu", EnvironmentInfo(device_kind="cuda", hardware="Fake GPU"))
    ev.kind = "cuda"
    ev._get_flusher = lambda: None  # type: ignore[method-assign]
    x = torch.zeros(4)
    sets = [[x, x, 1.0], [x, x, 2.0], [x, x, 3.0]]
    cfg = BenchmarkConfig(num_input_sets=1, num_trials=1)  # 1 checked + a pool of 2
    for workload in toy_workloads[:2]:
        refs, (latency, _) = ev._references(toy_definition, workload, sets, cfg)
        assert sorted(refs) == [0, 1, 2] and latency == 1.5
        for k, out in refs.items():  # each set's outputs come from a call on that set
            assert torch.equal(out[0], (k + 1.0) * x + x)
    timed = 3  # min(sets, timed_calls): the toy definition has no eval.toml (10 calls)
    assert shapes == [(1, timed), (0, timed)]
    assert calls == [1.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0]


def test_the_signed_cache_prefetch_ends_with_its_workload(
    monkeypatch, timed_methods, tmp_path, toy_definition, toy_workloads
):
    """Outputs on disk but no latency (another GPU, a new timing version): the timed sets are
    computed again, so they are not prefetched, and nothing prefetched outlives the workload
    (a judge serves a whole run: leftovers would pile up and could serve stale bytes)."""
    from types import SimpleNamespace

    from fib_core.bench import grading
    from fib_core.bench.evaluation.signed_cache import SignedReferenceCache
    from fib_core.bench.integrity import ensure_key

    monkeypatch.setattr(
        grading, "eval_settings", lambda name: SimpleNamespace(reference_timed_calls=2)
    )
    ev = Evaluator("cpu", EnvironmentInfo(device_kind="cuda", hardware="Fake GPU A"))
    ev.kind = "cuda"
    ev._get_flusher = lambda: None  # type: ignore[method-assign]
    ev.ref_cache = SignedReferenceCache(ensure_key(tmp_path), tmp_path)
    seen: list[list[str]] = []
    prefetch = ev.ref_cache.prefetch_outputs

    def spy(definition, keys):
        seen.append(list(keys))
        prefetch(definition, keys)

    ev.ref_cache.prefetch_outputs = spy  # type: ignore[method-assign]
    x = torch.zeros(4)
    sets = [[x, x, float(k)] for k in range(5)]
    cfg = BenchmarkConfig(num_input_sets=3, num_trials=1)
    ev._references(toy_definition, toy_workloads[0], sets, cfg)  # computes and stores all
    ev.env = EnvironmentInfo(device_kind="cuda", hardware="Fake GPU B")  # latency not cached
    refs, (latency, _) = ev._references(toy_definition, toy_workloads[0], sets, cfg)
    assert sorted(refs) == [0, 1, 2, 3, 4] and latency == 1.5
    assert [len(keys) for keys in seen] == [3, 3]  # the untimed sets only (2 are timed)
    assert ev.ref_cache._current == {}
    for k, out in refs.items():
        assert torch.equal(out[0], float(k) * x + x)
    ev.env = EnvironmentInfo(device_kind="cuda", hardware="Fake GPU B")
    ev._references(toy_definition, toy_workloads[0], sets, cfg)  # all cached: all prefetched
    assert len(seen[-1]) == 5 and ev.ref_cache._current == {}


def test_the_judge_prefetches_a_task_it_is_told_of_and_forgets_it_after(
    monkeypatch, tmp_path, toy_definition, toy_workloads
):
    """A warm run's judge reads and verifies every set the task may check as soon as the task
    starts (the worker is building and making inputs then), so the first check finds them in
    memory; the verdicts are those of a judge that was not told, and nothing is kept after."""
    from fib_core.bench.evaluation.judge import JudgeServer
    from fib_core.bench.evaluation.protocol import EvalTask
    from fib_core.bench.evaluation.reference_sets import checked_indices

    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path))
    cfg = BenchmarkConfig(device="cpu", num_input_sets=2, num_trials=2)
    judge = JudgeServer(Evaluator("cpu", EnvironmentInfo(device_kind="cpu", hardware="cpu")))

    def task(task_id: int) -> EvalTask:
        return EvalTask(
            task_id, toy_definition.to_dict(), {}, toy_workloads[0].to_dict(), cfg, None
        )

    def verdicts(t: EvalTask) -> list[str]:
        from fib_core.bench.evaluation.inputs import generate_inputs
        from fib_core.bench.evaluation.wire import encode_values

        out = []
        for k in (0, 1):
            x, y, alpha = generate_inputs(
                toy_definition, toy_workloads[0], seed=0, device="cpu", dataset_root=None,
                input_set=k,
            )
            specs, blob = encode_values([alpha * x + y + (k == 1)])  # set 1 wrong on purpose
            out.append(judge.check(t, k, 20, specs, b"".join(blob))["status"])
        return out

    assert verdicts(task(1)) == ["PASSED", "INCORRECT_NUMERICAL"]  # cold: computes, stores
    judge.forget()
    judge.announce(task(2))
    assert len(judge.evaluator.ref_cache._current) == len(checked_indices(20, 2, 2))
    assert verdicts(task(2)) == ["PASSED", "INCORRECT_NUMERICAL"]
    judge.forget()
    assert judge.evaluator.ref_cache._current == {}
    # Told of the next workload while task 3 runs, the judge has its files when task 4 starts.
    judge.announce(task(3))
    judge.announce_next(toy_workloads[0].to_dict())
    assert verdicts(task(3)) == ["PASSED", "INCORRECT_NUMERICAL"]
    judge.forget()
    cache = judge.evaluator.ref_cache
    assert len(cache._upcoming) == len(checked_indices(20, 2, 2))
    assert all(future.result() is not None for future, _ in cache._upcoming.values())
    from fib_core.bench.evaluation import signed_cache

    reads: list[str] = []
    real_read = signed_cache._read
    monkeypatch.setattr(signed_cache, "_read",
                        lambda path, pool=None: reads.append(path.name) or real_read(path))
    judge.announce(task(4))
    assert cache._upcoming == {}
    assert verdicts(task(4)) == ["PASSED", "INCORRECT_NUMERICAL"]
    assert not [name for name in reads if name.endswith(".safetensors")]  # read ahead, once
    judge.forget()


def test_a_broken_context_after_an_earlier_wrong_set_still_retires_the_worker(
    monkeypatch, tmp_path, toy_definition, toy_workloads, toy_solution_json
):
    """Set 1 wrong, then the call on set 2 breaks the CUDA context: the verdict is set 1's
    (checked in order), and the result still asks for a new worker."""
    from fib_core.bench.evaluation.protocol import EvalTask

    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path))
    ev = Evaluator("cpu", EnvironmentInfo(device_kind="cpu", hardware="cpu"))
    monkeypatch.setattr(ev, "_cuda_broken", lambda: True)
    cfg = BenchmarkConfig(device="cpu", warmup_runs=1, iterations=3, num_trials=2)
    task = EvalTask(
        1,
        toy_definition.to_dict(),
        toy_solution_json("wrong_then_raises"),
        toy_workloads[0].to_dict(),
        cfg,
        None,
    )
    result = ev.evaluate(task)
    assert result.status.value == "INCORRECT_NUMERICAL" and "input set 1" in result.log
    assert result.fatal

