"""The engine end to end on CPU: every outcome in one run, resume, isolation, events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fib_core.bench import (
    Benchmark,
    BenchmarkConfig,
    Log,
    SolutionStarted,
    WorkloadFinished,
    WorkloadSkipped,
    WorkloadStarted,
)
from fib_core.data.solution import Solution
from fib_core.data.traceset import TraceSet

FAST = dict(warmup_runs=1, iterations=3, num_trials=2, device="cpu")

EXPECTED = {
    "correct": ("PASSED", ""),
    "triton_axpy": ("PASSED", ""),
    "wrong": ("INCORRECT_NUMERICAL", "elements"),
    "wrong_shape": ("INCORRECT_SHAPE", "shape (4, 8), expected (4, 16)"),
    "wrong_dtype": ("INCORRECT_DTYPE", "float64"),
    "nan_output": ("INCORRECT_NUMERICAL", "NaN in the solution's output"),
    "unwritten": ("INCORRECT_NUMERICAL", "32 of 64 elements"),
    "mutates_input": ("INCORRECT_NUMERICAL", "modified input(s) x in place"),
    "raises": ("RUNTIME_ERROR", "raised on purpose"),
    "kills_process": ("RUNTIME_ERROR", "about to take the worker down"),
    "hangs": ("TIMEOUT", "timed out after 4 s"),
    # Replaying by input address fails the check of the second input set, before timing.
    "pointer_cache": ("INCORRECT_NUMERICAL", "input set 1"),
    # Computing only while being checked fails the re-check of the timed calls.
    "lazy_after_checks": ("INCORRECT_NUMERICAL", "outputs of timed call"),
    "syntax_error": ("COMPILE_ERROR", "SyntaxError"),
    # Checks are pipelined and timed calls checked after the last trial, yet the first failure
    # in call order still decides: a wrong set before a crash is INCORRECT, not RUNTIME_ERROR.
    "wrong_then_raises": ("INCORRECT_NUMERICAL", "input set 1"),
    "wrong_timed_then_raises": ("INCORRECT_NUMERICAL", "outputs of timed call"),
}


def _trace_lines(root):
    files = sorted((root / "traces").rglob("*.jsonl"))
    lines = [line for f in files for line in f.read_text().splitlines() if line.strip()]
    return [json.loads(line, parse_constant=_reject) for line in lines]


def _reject(token):
    raise ValueError(f"non-standard JSON constant {token}")


@pytest.mark.slow
def test_every_outcome_in_one_run(make_dataset):
    root = make_dataset(list(EXPECTED))
    cfg = BenchmarkConfig(timeout_seconds=4, **FAST)
    events = []
    with Benchmark(TraceSet.from_path(root), cfg, on_event=events.append) as bench:
        traces = bench.run_all(dump_traces=True)
    replaced = [e.message for e in events if isinstance(e, Log) and "replacing" in e.message]
    assert len(replaced) == 4  # kills_process and hangs, two workloads each
    assert len(traces) == 2 * len(EXPECTED)
    by_pair = {(t.solution, t.workload.uuid): t for t in traces}
    for name, (status, needle) in EXPECTED.items():
        for uuid in ("toy-0001-small", "toy-0002-large"):
            ev = by_pair[(name, uuid)].evaluation
            assert ev.status.value == status, (name, uuid, ev.log)
            if uuid == "toy-0001-small":
                assert needle in ev.log, (name, ev.log)
            assert ev.extra["seed"] == 0 and ev.extra["device"] == "cpu"
            assert ev.extra["timing"] == "wall-clock, not comparable"
    passed = by_pair[("correct", "toy-0002-large")].evaluation
    perf = passed.performance
    assert perf.latency_ms > 0 and perf.reference_latency_ms > 0
    assert perf.speedup_factor == pytest.approx(perf.reference_latency_ms / perf.latency_ms)
    assert perf.extra["timing_method"] == "wall-clock"
    assert set(perf.extra["spread"]["overall"]) >= {"min", "p10", "median", "p90", "max", "std"}
    assert len(perf.extra["spread"]["trials"]) == 2
    # 4 sets checked before timing, then one per call made while timing: 1 warm-up + 2 x 3.
    # 4 checked sets, then per trial one warm-up call and 3 timed calls, each a set of its own
    assert passed.extra["num_input_sets"] == 12
    assert passed.environment.libs["torch"]
    # The file on disk is strict JSON, one record per pair, and loads back through the schema.
    records = _trace_lines(root)
    assert len(records) == len(traces)
    reloaded = TraceSet.from_path(root)
    assert sum(len(v) for v in reloaded.traces.values()) == len(traces)
    assert {t.evaluation.status.value for t in reloaded.traces["toy_axpy"]} == {
        s for s, _ in EXPECTED.values()}


class _StopAfter:
    def __init__(self, n: int) -> None:
        self.n, self.seen = n, 0

    def __call__(self, event) -> None:
        if isinstance(event, WorkloadFinished):
            self.seen += 1
            if self.seen == self.n:
                raise KeyboardInterrupt  # what Ctrl-C does mid-run


def test_resume_after_an_interrupted_run_does_not_redo_finished_work(make_dataset):
    root = make_dataset(["correct", "wrong"])
    cfg = BenchmarkConfig(**FAST)
    with pytest.raises(KeyboardInterrupt), Benchmark(TraceSet.from_path(root), cfg) as bench:
        bench.run_all(dump_traces=True, on_event=_StopAfter(3))
    first = _trace_lines(root)
    assert len(first) == 3  # each finished workload was appended as it finished
    events = []
    with Benchmark(TraceSet.from_path(root), cfg, on_event=events.append) as bench:
        new = bench.run_all(dump_traces=True, resume=True)
    assert len(new) == 1
    assert sum(isinstance(e, WorkloadSkipped) for e in events) == 3
    assert sum(isinstance(e, WorkloadStarted) for e in events) == 1
    final = _trace_lines(root)
    assert final[:3] == first and len(final) == 4
    assert {(r["solution"], r["workload"]["uuid"]) for r in final} == {
        (s, u) for s in ("correct", "wrong") for u in ("toy-0001-small", "toy-0002-large")}


def test_isolated_mode_and_run_solution_events(make_dataset, toy_solution_json):
    root = make_dataset([])
    ts = TraceSet.from_path(root)
    solution = Solution.from_dict(toy_solution_json("correct"))  # not part of the dataset
    events = []
    cfg = BenchmarkConfig(isolated=True, **FAST)
    with Benchmark(ts, cfg) as bench:
        traces = bench.run_solution(solution, on_event=events.append)
        assert bench._workers_started == 2  # one process per (solution, workload)
        # the second workload's worker booted while the first ran; none after the last
        assert bench._spares_used == 1 and bench._spare is None
        # a spare started beside one solution's code never serves another solution
        bench._launch_spare(solution.hash())
        spare = bench._spare
        other = Solution.from_dict(toy_solution_json("wrong"))
        bench.run_solution(other, traces[:1])
        assert bench._spares_used == 1 and not spare.alive
    assert [t.evaluation.status.value for t in traces] == ["PASSED", "PASSED"]
    assert all(t.evaluation.extra["runner"] == "isolated" for t in traces)
    assert isinstance(events[0], SolutionStarted) and events[0].total == 2
    kinds = [type(e).__name__ for e in events if not type(e).__name__ == "Log"]
    assert kinds == ["SolutionStarted", "WorkloadStarted", "WorkloadFinished",
                     "WorkloadStarted", "WorkloadFinished"]
    assert ts.traces == {}  # run_solution does not write unless asked
    assert not (root / "traces").exists()


def test_a_stream_runs_what_it_takes_when_it_takes_it(make_dataset, toy_solution_json):
    """Several GPUs share a queue: the engine takes its next workload only when the previous
    one is done (another GPU may take it meanwhile), and announces the whole queue."""
    from fib_core.bench.engine.stream import WorkloadStream

    root = make_dataset([])
    ts = TraceSet.from_path(root)
    solution = Solution.from_dict(toy_solution_json("correct"))
    records = ts.workloads["toy_axpy"]
    log: list = []

    class OtherGpuTakesTheFirst:
        """Hands out the last workload, then nothing: the other GPU took the first."""

        def __init__(self) -> None:
            self.left = [len(records) - 1]

        def take(self):
            log.append("take")
            return self.left.pop() if self.left else None

        def peek(self):
            return self.left[-1] if self.left else None

    stream = WorkloadStream(records, OtherGpuTakesTheFirst())
    events: list = []

    def on_event(event):
        if not isinstance(event, Log):
            log.append(type(event).__name__)
        events.append(event)

    with Benchmark(ts, BenchmarkConfig(**FAST)) as bench:
        traces = bench.run_solution(solution, stream, on_event=on_event)
    assert [t.workload.uuid for t in traces] == [records[-1].workload.uuid]
    assert stream.taken == [records[-1]] and traces[0].evaluation.status.value == "PASSED"
    assert log == ["SolutionStarted", "take", "WorkloadStarted", "WorkloadFinished", "take"]
    assert events[0].total == len(records) == 2


def test_random_scalar_inputs_rotate_with_their_input_set(make_dataset, toy_solution_json):
    """A scalar drawn per input set reaches the timed calls with its own set's tensors, so a
    correct kernel passes (the re-check compares against that set's reference)."""
    root = make_dataset([])
    wl = root / "workloads" / "toy" / "toy_axpy.jsonl"
    wl.write_text(wl.read_text().replace('{"type": "scalar", "value": -0.5}', '{"type": "random"}'))
    ts = TraceSet.from_path(root)
    solution = Solution.from_dict(toy_solution_json("correct"))
    cfg = BenchmarkConfig(**{**FAST, "iterations": 6, "num_trials": 2})
    with Benchmark(ts, cfg) as bench:
        traces = bench.run_solution(solution)
    assert [t.evaluation.status.value for t in traces] == ["PASSED", "PASSED"], [
        t.evaluation.log for t in traces
    ]
    assert traces[1].evaluation.extra["num_input_sets"] > 1


def test_content_fingerprinting_gains_nothing(make_dataset, toy_solution_json):
    """Every call made while timing gets inputs of its own, so a kernel that replays results
    by input content never finds a repeat (it passes, having computed every call)."""
    root = make_dataset([])
    ts = TraceSet.from_path(root)
    solution = Solution.from_dict(toy_solution_json("content_cache"))
    cfg = BenchmarkConfig(**{**FAST, "iterations": 5, "num_trials": 2})
    with Benchmark(ts, cfg) as bench:
        traces = bench.run_solution(solution)
        logs = "".join(p.read_text() for p in Path(bench._log_dir).glob("*.log"))
    assert [t.evaluation.status.value for t in traces] == ["PASSED", "PASSED"]
    last = [line for line in logs.splitlines() if line.startswith("content_cache calls")][-1]
    assert "'replayed': 0" in last, last


@pytest.mark.parametrize("mode", ["shared", "unsupported", "cannot-create"])
def test_outputs_reach_the_judge_through_shared_memory_or_as_bytes(
    monkeypatch, make_dataset, toy_solution_json, mode
):
    """Where sealed memfds exist every check names a slot of the worker's shared output
    buffer (no bytes through the parent); without them, or when one cannot be made, the
    outputs travel as bytes. The verdicts are the judge's either way: a wrong kernel fails, a
    right one passes."""
    from fib_core.bench.engine import pool
    from fib_core.bench.evaluation import exchange

    shared = mode == "shared"
    if mode != "unsupported" and not exchange.supported():
        pytest.skip("sealed memfds are Linux-only")
    if mode == "unsupported":
        monkeypatch.setattr(exchange, "supported", lambda: False)
    if mode == "cannot-create":

        def refuse(*args, **kwargs):
            raise OSError(24, "Too many open files")

        monkeypatch.setattr(exchange.ArenaHandle, "create", refuse)
    seen: list[bool] = []
    real = pool.validate_check

    def spy(header, blob, n_outputs, arena=None):
        seen.append("slot" in header and not blob)
        return real(header, blob, n_outputs, arena)

    monkeypatch.setattr(pool, "validate_check", spy)
    ts = TraceSet.from_path(make_dataset([]))
    cfg = BenchmarkConfig(**FAST)
    with Benchmark(ts, cfg) as bench:
        statuses = [
            t.evaluation.status.value
            for name in ("correct", "wrong")
            for t in bench.run_solution(Solution.from_dict(toy_solution_json(name)))
        ]
    assert statuses == ["PASSED", "PASSED", "INCORRECT_NUMERICAL", "INCORRECT_NUMERICAL"]
    assert len(seen) >= 2 * (cfg.num_input_sets + 2 * cfg.num_trials) + 2
    assert set(seen) == {shared}


def test_resume_counts_only_traces_of_the_same_code_and_device(toy_solution_json):
    """A CPU smoke trace does not stand in for a GPU measurement, nor an old kernel's for an
    edited one."""
    from fib_core.bench.engine.traces import is_finished

    solution = Solution.from_dict(toy_solution_json("correct"))
    done = {(solution.name, "w1"): [(solution.hash(), "cpu")]}
    assert is_finished(done, solution, "w1", "cpu")
    assert not is_finished(done, solution, "w1", "cuda")
    assert not is_finished(done, solution, "w2", "cpu")
    done[(solution.name, "w1")] = [("an-older-hash", "cuda")]
    assert not is_finished(done, solution, "w1", "cuda")
    done[(solution.name, "w1")].append((None, None))  # a trace written by another tool
    assert is_finished(done, solution, "w1", "cuda")
