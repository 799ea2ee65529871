"""Both documented Benchmark forms, the runner shapes and the organizers' script, on CPU."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from fib_core.bench import Benchmark, BenchmarkConfig
from fib_core.bench.runner import BaselineHandle, RunnerError, RunnerFatalError
from fib_core.bench.runners.mp_runner import MultiProcessRunner
from fib_core.bench.timing import time_runnable
from fib_core.data import EvaluationStatus, TraceSet
from fib_core.errors import ConfigError

from .conftest import EXAMPLES, REPO

FAST = BenchmarkConfig(warmup_runs=1, iterations=3, num_trials=1, device="cpu")


def _outcomes(traces) -> set[tuple[str, str, str]]:
    return {(t.solution, t.workload.uuid, t.evaluation.status.value) for t in traces}


def test_constructor_takes_a_config_or_a_log_level(tiny_root: Path):
    ts = TraceSet.from_path(tiny_root)
    assert Benchmark(ts, FAST).config is FAST
    assert Benchmark(ts, config=FAST).config is FAST
    listing = Benchmark(ts, "debug")
    assert listing.log_level == "DEBUG" and listing.config == BenchmarkConfig()
    assert Benchmark(ts, log_level="WARNING", config=FAST).config is FAST
    with pytest.raises(ConfigError, match="log_level = 'LOUD'"):
        Benchmark(ts, "LOUD")
    with pytest.raises(ConfigError, match="two configs"):
        Benchmark(ts, FAST, FAST)


def test_typos_and_wrong_types_are_one_clear_error(tiny_root: Path):
    ts = TraceSet.from_path(tiny_root)
    bench = Benchmark(ts, FAST)
    with pytest.raises(ConfigError, match="definitions: 'tiny_scaled_ad' is not in the dataset; "
                                          "did you mean 'tiny_scaled_add'"):
        bench.evaluate(BenchmarkConfig(device="cpu", definitions=["tiny_scaled_ad"]))
    with pytest.raises(ConfigError, match="solutions: 'nope' is not in the dataset"):
        bench.run(BenchmarkConfig(device="cpu", solutions=["nope"]))
    with pytest.raises(TypeError, match="pass a BenchmarkConfig"):
        bench.run("x")
    with pytest.raises(TypeError, match="pass a TraceSet"):
        Benchmark(None)
    bench.close()


@pytest.mark.slow
def test_run_flush_and_evaluate_match_run_all(tiny_root: Path):
    ts = TraceSet.from_path(tiny_root)
    old = tiny_root / "traces" / "old" / "t.jsonl"
    old.parent.mkdir(parents=True)
    old.write_text("")  # an earlier run's file: the first flush moves it aside
    with Benchmark(ts, log_level="ERROR", config=FAST) as bench:
        results = bench.evaluate(FAST)
        assert results.root is None and bench.staged_traces == []
        evaluated = [t for traces in results.traces.values() for t in traces]
        assert len(evaluated) == 4 and all(t.is_successful() for t in evaluated)
        assert results.definitions.keys() == ts.definitions.keys()

        kit = bench.run_all(dump_traces=False)
        assert _outcomes(kit) == _outcomes(evaluated)

        # A call's config is that call's only: run() without one is the construction's again.
        one = BenchmarkConfig(warmup_runs=1, iterations=3, num_trials=1, device="cpu",
                              solutions=["tiny_returning"])
        only = [t for traces in bench.evaluate(one).traces.values() for t in traces]
        assert {t.solution for t in only} == {"tiny_returning"}
        assert bench.config is FAST
        assert {t.solution for t in bench.run_all(dump_traces=False)} == {
            t.solution for t in evaluated}
        bench.run()
        assert _outcomes(bench.staged_traces) == _outcomes(evaluated)
        assert not any((tiny_root / "traces").rglob("*.jsonl")) or old.exists()
        bench.flush()
        assert bench.staged_traces == []
        with pytest.raises(ConfigError, match="device"):
            bench.run(BenchmarkConfig(device="cuda"))
    backups = list(tiny_root.glob("traces_bak_*"))
    assert len(backups) == 1 and (backups[0] / "old" / "t.jsonl").exists()
    written = TraceSet.from_path(tiny_root).traces["tiny_scaled_add"]
    assert _outcomes(written) == _outcomes(evaluated)


@pytest.mark.slow
def test_multi_process_runner_evaluates_like_the_engine(tiny_root: Path):
    ts = TraceSet.from_path(tiny_root)
    definition = ts.definitions["tiny_scaled_add"]
    workload = ts.workloads["tiny_scaled_add"][0].workload
    solution = ts.get_solution("tiny_returning")
    runner = MultiProcessRunner("cpu")
    try:
        handle = runner.run_ref(definition, workload, FAST, tiny_root)
        assert isinstance(handle, BaselineHandle)
        evaluation = runner.run_solution(solution, handle, FAST)
        assert evaluation.status is EvaluationStatus.PASSED
        assert evaluation.performance.latency_ms > 0
        with Benchmark(ts, FAST) as bench:
            (trace,) = bench.run_solution(solution, [workload])
        assert trace.evaluation.status == evaluation.status
        assert trace.evaluation.environment == evaluation.environment

        other = ts.definitions["tiny_scaled_add"].to_dict() | {"name": "another"}
        from fib_core.data import Definition

        wrong = runner.run_ref(Definition.from_dict(other), workload, FAST)
        with pytest.raises(RunnerError, match="is for 'tiny_scaled_add'"):
            runner.run_solution(solution, wrong, FAST)
        runner.release(handle)
        with pytest.raises(RunnerError, match="unknown or released"):
            runner.run_solution(solution, handle, FAST)
    finally:
        runner.close()
    with pytest.raises(RunnerFatalError, match="cuda:1"):
        MultiProcessRunner("cuda:1")


def test_time_runnable_calls_warmup_plus_iterations():
    calls = []
    latency = time_runnable(
        lambda **kw: calls.append(kw), {"a": 1}, warmup=2, iters=5, device="cpu"
    )
    assert calls == [{"a": 1}] * 7
    assert latency >= 0.0


@pytest.mark.slow
def test_the_organizers_script_runs_unchanged(tiny_root: Path):
    script = EXAMPLES / "organizers_script.py"
    done = subprocess.run(
        [sys.executable, str(script), str(tiny_root)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tiny_dps: keyword call matches the reference" in done.stdout
    assert done.stdout.count("successful=True") == 4
    assert "all traces passed" in done.stdout
    assert len(TraceSet.from_path(tiny_root).traces["tiny_scaled_add"]) == 4
    # Apart from the import block, the script is the organizers' code: no kit-only names.
    body = script.read_text().split("# --- the organizers' way", 1)[1]
    for kit_only in (r"\brun_all\(", r"\bload_json\(", r"\.var_axes\b", r"\.run\(inputs"):
        assert re.search(kit_only, body) is None, kit_only


def test_ctrl_c_kills_the_workers_instead_of_asking_them_to_exit(tiny_root: Path):
    """A busy worker ignores SIGINT and would not answer a request to close: after Ctrl-C the
    Benchmark kills at once rather than waiting out the polite close's deadline."""

    class Handle:
        proc = object()

        def __init__(self) -> None:
            self.calls: list[str] = []

        def _ask_to_close(self) -> bool:
            self.calls.append("ask")
            return False

        def kill(self) -> None:
            self.calls.append("kill")

    for exc, expected in ((KeyboardInterrupt, ["kill"]), (None, ["ask", "kill"])):
        bench = Benchmark(TraceSet.from_path(tiny_root), FAST)
        bench._worker, bench._judge = Handle(), Handle()
        worker, judge = bench._worker, bench._judge
        bench.__exit__(exc, None, None)
        assert worker.calls == expected and judge.calls == expected
