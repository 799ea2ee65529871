"""The FlashInfer baselines: the catalog, the latency cache, a run's contest score, the track's.

CPU tests use real traces and a real cache folder; the GPU test times the baselines that run on
the GPU at hand through the engine, as a run does.
"""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from fib_core.baselines.cache import CACHE_ENV, BaselineCache, cache_root
from fib_core.baselines.catalog import (
    AUTHOR,
    BASELINES,
    INSTALL_HINT,
    SOURCES_DIR,
    Baseline,
    baseline_for,
    capability_of,
)
from fib_core.baselines.contest import contest_score
from fib_core.baselines.measure import BaselineTimes, baseline_times
from fib_core.data import Trace
from fib_core.dataset import registry
from fib_core.project.track_score import contest_track_lines

DECODE = "gdn_decode_qk4_v8_d128_k_last"
PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
MOE = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"
ORGANIZERS_NAMES = {
    MOE: "flashinfer_wrapper_9sdjf3",
    "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64": "flashinfer_wrapper_5af199",
    "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64": "flashinfer_deepgemm_wrapper_2ba145",
    DECODE: "flashinfer_wrapper_9b7f1e",
    PREFILL: "flashinfer_wrapper_123ca6",
}
H100 = ("NVIDIA H100 80GB HBM3", "9.0")


def _trace(uuid: str, latency: float | None, *, solution: str = "mine",
           definition: str = DECODE, gpu: tuple[str, str] = H100) -> Trace:
    """A trace as the engine writes it: passed with ``latency`` (ms), or failed (None)."""
    passed = latency is not None
    return Trace.from_dict({
        "definition": definition,
        "solution": solution,
        "workload": {"uuid": uuid, "axes": {"batch_size": 1}, "inputs": {}},
        "evaluation": {
            "status": "PASSED" if passed else "INCORRECT_NUMERICAL",
            "log": "" if passed else "max abs error 3.0",
            "correctness": {"max_relative_error": 1e-3, "max_absolute_error": 1e-4},
            "performance": {"latency_ms": latency, "reference_latency_ms": 10.0,
                            "speedup_factor": 10.0 / latency} if passed else None,
            "environment": {"hardware": gpu[0], "libs": {"compute_capability": gpu[1]}},
            "timestamp": "2026-01-15T10:00:00",
        },
    })


# --- the catalog -------------------------------------------------------------------------------


def test_one_baseline_per_contest_definition_under_the_organizers_names():
    assert {b.definition: b.name for b in BASELINES} == ORGANIZERS_NAMES
    assert set(ORGANIZERS_NAMES) <= set(registry.definitions())
    assert baseline_for("no_such_definition") is None


@pytest.mark.parametrize("baseline", BASELINES, ids=lambda b: b.definition)
def test_baseline_is_a_normal_solution_whose_run_takes_the_definitions_inputs(baseline):
    sol = baseline.solution()
    assert (sol.name, sol.author, sol.definition) == (baseline.name, AUTHOR, baseline.definition)
    assert sol.spec.language.value == "python"
    assert sol.spec.entry_point == "main.py::run"
    assert sol.spec.destination_passing_style is False
    assert [s.path for s in sol.sources] == ["main.py"]
    tree = ast.parse(sol.sources[0].content)
    run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    definition = registry.get(baseline.definition).definition_json()
    assert [a.arg for a in run.args.args] == list(definition["inputs"])
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in (node.names if isinstance(node, ast.Import) else [node])
                if getattr(alias, "name", None)} | {
        node.module.split(".")[0] for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module}
    assert imported - {"math", "torch", "flashinfer"} <= set(baseline.modules)
    # Packing is stable: the cache key depends on the code's hash.
    assert sol.hash() == baseline.solution().hash()


def test_sources_folder_holds_exactly_the_catalogs_baselines():
    assert sorted(p.name for p in SOURCES_DIR.iterdir() if p.is_dir()) == sorted(ORGANIZERS_NAMES)


def test_sm100_only_baselines_name_the_reason_and_modal_on_an_h100():
    for definition in (MOE, "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"):
        why = baseline_for(definition).unavailable_reason((9, 0), H100[0])
        assert "SM100 or SM103 only" in why and "NVIDIA H100 80GB HBM3 is SM90" in why
        assert "modal run scripts/run_modal.py" in why
    assert "need a CUDA GPU" in baseline_for(DECODE).unavailable_reason(None, None)


def test_a_missing_package_is_named_with_its_install_command():
    missing = Baseline(DECODE, "x", "some kernel", ((9, 0),), modules=("fib_surely_absent_pkg",))
    assert missing.unavailable_reason((9, 0), "H100") == (
        "fib_surely_absent_pkg is not installed: pip install fib_surely_absent_pkg")
    decode = baseline_for(DECODE)
    if importlib.util.find_spec("flashinfer") is None:
        assert decode.unavailable_reason((9, 0), "H100") == (
            f"flashinfer is not installed: {INSTALL_HINT}")
    else:
        assert decode.unavailable_reason((9, 0), "H100") is None


def test_capability_text():
    assert capability_of("9.0") == (9, 0) and capability_of("10.3") == (10, 3)
    assert capability_of("") is None and capability_of("sm90") is None


# --- the cache ---------------------------------------------------------------------------------


def _cache(tmp_path: Path, monkeypatch, **settings: Any) -> BaselineCache:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    timing = {"warmup_runs": 10, "iterations": 50, "num_trials": 3, "timing_method": "auto"}
    return BaselineCache.for_run(DECODE, "flashinfer_wrapper_9b7f1e", "abc123", H100[0],
                                 {"flashinfer": "0.7.2"}, {**timing, **settings, "atol": 0.1})


def test_cache_keeps_latencies_per_gpu_version_and_settings(tmp_path, monkeypatch):
    cache = _cache(tmp_path, monkeypatch)
    assert cache_root() == tmp_path
    assert cache.path.parent == tmp_path / "NVIDIA_H100_80GB_HBM3" / "flashinfer-0.7.2"
    assert cache.load() == {}
    entries = {"w1": {"latency_ms": 0.012}, "w2": {"status": "INCORRECT_NUMERICAL", "reason": "x"}}
    cache.save(entries)
    assert _cache(tmp_path, monkeypatch).load() == entries
    # Tolerances do not change a latency; the timing settings do.
    assert _cache(tmp_path, monkeypatch, atol=5.0).path == cache.path
    other = _cache(tmp_path, monkeypatch, iterations=5)
    assert other.path != cache.path and other.load() == {}


def test_cache_ignores_forged_foreign_or_broken_files(tmp_path, monkeypatch):
    cache = _cache(tmp_path, monkeypatch)
    cache.save({"ok": {"latency_ms": 1.5}, "zero": {"latency_ms": 0},
                "nan": {"latency_ms": float("nan")}, "junk": 3})
    assert cache.load() == {"ok": {"latency_ms": 1.5}}
    assert cache.signature_path.is_file()
    # A solution rewriting the file (a slower baseline inflates every score) is not believed.
    cache.path.write_text(cache.path.read_text().replace("1.5", "1500.0"))
    assert cache.load() == {}
    cache.save({"ok": {"latency_ms": 1.5}})
    cache.signature_path.unlink()
    assert cache.load() == {}
    cache.path.write_text("{not json")
    assert cache.load() == {}
    # Signed, but for another setup (the header differs): not this run's figures.
    other = BaselineCache(cache.path, {**cache.header, "gpu": "NVIDIA B200"})
    other.save({"ok": {"latency_ms": 1.5}})
    assert cache.load() == {}


# --- a run's contest score ---------------------------------------------------------------------


def _times(latencies: dict[str, float], failed: dict[str, str] | None = None,
           reason: str | None = None) -> dict[str, Any]:
    return BaselineTimes(DECODE, baseline="flashinfer_wrapper_9b7f1e", latencies=latencies,
                         failed=failed or {}, reason=reason, gpu=H100[0],
                         versions={"flashinfer": "0.7.2"}).to_dict()


def test_contest_score_is_the_mean_of_baseline_over_solution_latency():
    traces = [_trace("w1", 0.5), _trace("w2", 2.0), _trace("w3", 1.0)]
    # Two shards' baseline figures; the baseline failed w3, so w3 does not count.
    score = contest_score(DECODE, traces, [_times({"w1": 1.0}), _times({"w2": 1.0},
                                                                       {"w3": "INCORRECT: x"})])
    assert score.score == pytest.approx((2.0 + 0.5) / 2)
    assert (score.compared, score.selected, score.baseline_failed) == (2, 3, 1)
    assert score.baseline_latency_ms == {"w1": 1.0, "w2": 1.0}
    assert score.baseline_failures == {"w3": "INCORRECT: x"}
    assert score.line() == (
        "contest score 1.250x vs FlashInfer flashinfer_wrapper_9b7f1e (2 of 3 workloads, 1 left "
        "out: the baseline failed them (e.g. w3: INCORRECT: x); faster on 1; NVIDIA H100 80GB "
        "HBM3, flashinfer 0.7.2)")
    assert json.loads(json.dumps(score.model_dump(mode="json")))["score"] == pytest.approx(1.25)


def test_the_score_line_says_why_the_baseline_failed_even_when_it_failed_everything():
    traces = [_trace("w1", 0.5), _trace("w2", 1.0)]
    score = contest_score(DECODE, traces, [_times({}, {"w2": "TIMEOUT:", "w1": "INCORRECT:\n  x"})])
    assert score.score is None and score.baseline_failed == 2
    assert score.line() == ("contest score: none (FlashInfer baseline flashinfer_wrapper_9b7f1e: "
                            "the baseline passed none of this run's workloads (e.g. w1: "
                            "INCORRECT: x))")


def test_any_failed_workload_zeroes_the_contest_score():
    traces = [_trace("w1", 0.5), _trace("w2", None)]
    score = contest_score(DECODE, traces, [_times({"w1": 1.0, "w2": 1.0})])
    assert score.score == 0.0 and score.compared == 2
    assert "a workload failed: any failure scores 0" in score.line()


def test_no_contest_score_says_why():
    traces = [_trace("w1", 0.5)]
    why = "FlashInfer trtllm_fp8_block_scale_moe runs on SM100 or SM103 only"
    score = contest_score(MOE, traces, [_times({}, reason=why)])
    assert score.score is None
    assert score.line() == f"contest score: none (FlashInfer baseline flashinfer_wrapper_9b7f1e: {why})"
    assert contest_score(DECODE, traces, [None]).reason == (
        "no baseline figures came back from this run")
    assert contest_score(DECODE, traces, [_times({"other": 1.0})]).reason == (
        "the baseline passed none of this run's workloads")


def test_baseline_times_refuses_before_running_where_the_baseline_cannot_run(tmp_path):
    """No engine is started: the GPU the solution ran on rules the baseline out."""
    times = baseline_times(None, MOE, [], [_trace("w1", 1.0, definition=MOE)], config=None)
    assert times.baseline == "flashinfer_wrapper_9sdjf3" and times.measured == 0
    assert "SM100 or SM103 only (NVIDIA H100 80GB HBM3 is SM90)" in times.reason
    assert "no FlashInfer baseline" in baseline_times(None, "toy", [], [], None).reason
    cpu = baseline_times(None, DECODE, [], [], None)  # no GPU figures at all
    assert cpu.reason == "the FlashInfer baselines need a CUDA GPU; this run has none"


def test_a_baseline_that_failed_to_build_is_not_called_timed_or_kept(tmp_path, monkeypatch):
    """A build error is environment trouble, tried again next run: it is neither counted as
    timed nor kept, while the workload the baseline passed is both (a run once printed "timed
    on 3 workload(s) now; kept for the next runs" after three import errors)."""
    from types import SimpleNamespace

    from fib_core.baselines import measure
    from fib_core.bench import BenchmarkConfig

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(Baseline, "unavailable_reason", lambda self, capability, gpu: None)
    monkeypatch.setattr(Baseline, "versions", lambda self: {"flashinfer": "0.0.test"})
    outcome = {"w1": {"status": "COMPILE_ERROR", "reason": "No module named 'flashinfer.gemm'"},
               "w2": {"latency_ms": 0.5}}
    asked: list[list[str]] = []

    def fake_measure(trace_set, solution, workloads, *rest):
        asked.append([w.workload.uuid for w in workloads])
        return {w.workload.uuid: outcome[w.workload.uuid] for w in workloads}

    monkeypatch.setattr(measure, "_measure", fake_measure)
    records = [SimpleNamespace(workload=SimpleNamespace(uuid=u)) for u in outcome]
    traces = [_trace(u, 1.0) for u in outcome]
    config = BenchmarkConfig(device="cuda")
    first = baseline_times(None, DECODE, records, traces, config)
    assert (first.measured, first.kept) == (1, 1)
    assert first.failed == {"w1": "COMPILE_ERROR: No module named 'flashinfer.gemm'"}
    assert first.latencies == {"w2": 0.5}
    again = baseline_times(None, DECODE, records, traces, config)
    assert asked == [["w1", "w2"], ["w1"]]  # the kept latency is read, the build tried again
    assert (again.measured, again.kept, again.latencies) == (0, 0, {"w2": 0.5})


# --- the track ---------------------------------------------------------------------------------


def test_track_contest_score_halves_and_says_what_it_covers():
    lines = contest_track_lines("gated_delta_net", {
        DECODE: {"score": 1.5},
        PREFILL: {"score": None, "reason": "flashinfer is not installed"},
    })
    assert lines[0] == ("contest score of track gated_delta_net: 0.750x (1 of 2 definitions "
                        "scored; the others count 0)")
    assert lines[1].split() == [DECODE, "1.500x", "vs", "FlashInfer"]
    assert lines[2].split(maxsplit=1) == [PREFILL, "counts 0: flashinfer is not installed"]
    both = contest_track_lines("gated_delta_net", {DECODE: {"score": 1.5},
                                                   PREFILL: {"score": 0.5}})
    assert both[0].startswith("contest score of track gated_delta_net: 1.000x (2 of 2 ")
    lone = contest_track_lines("gated_delta_net", {DECODE: {"score": 2.0}})
    assert lone[2].split(maxsplit=1) == [PREFILL, "counts 0: not in this fork"]


def test_results_file_carries_the_contest_score(tmp_path):
    from fib_core.report.results import RunResults

    results = RunResults.from_traces([_trace("w1", 0.5)], DECODE, gpu_name=H100[0])
    score = contest_score(DECODE, [_trace("w1", 0.5)], [_times({"w1": 1.0})])
    results.contest, results.contest_score = score.model_dump(mode="json"), score.score
    back = RunResults.from_json(results.to_json(tmp_path / "run.json"))
    assert back.contest_score == pytest.approx(2.0)
    assert back.contest["baseline"] == "flashinfer_wrapper_9b7f1e"
    assert json.loads((tmp_path / "run.json").read_text())["contest_score"] == pytest.approx(2.0)


# --- on a GPU ----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("baseline", BASELINES, ids=lambda b: b.definition)
def test_gpu_baseline_passes_against_the_reference_and_is_cached(baseline, tmp_path, monkeypatch):
    """Each baseline that runs on this GPU passes the kit's checks on a few real workloads and
    is timed; a second call reads the cache instead of measuring. One that cannot run here
    says why (its kernels' GPUs or a missing package) and is skipped."""
    import dataclasses

    import torch

    from fib_core.bench import Benchmark, BenchmarkConfig
    from fib_core.data import TraceSet
    from fib_core.dataset import default_dataset_path

    major, minor = torch.cuda.get_device_capability()
    why = baseline.unavailable_reason((major, minor), torch.cuda.get_device_name())
    if why is not None:
        pytest.skip(why)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    trace_set = TraceSet.from_path(default_dataset_path())
    workloads = trace_set.workloads[baseline.definition][:3]
    config = BenchmarkConfig(device="cuda")
    with Benchmark(trace_set, dataclasses.replace(
            config, allow_input_mutation=baseline.mutates_inputs)) as bench:
        checked = bench.run_solution(baseline.solution(), workloads)
    assert [t.evaluation.status.value for t in checked] == ["PASSED"] * len(workloads), [
        t.evaluation.log[-500:] for t in checked]
    first = baseline_times(trace_set, baseline.definition, workloads, checked, config)
    assert first.reason is None and first.measured == len(workloads)
    assert set(first.latencies) == {w.workload.uuid for w in workloads}
    again = baseline_times(trace_set, baseline.definition, workloads, checked, config)
    assert again.measured == 0 and again.latencies == first.latencies
    print(baseline.definition, {u[:8]: round(ms * 1000, 2) for u, ms in first.latencies.items()},
          "us")


@pytest.mark.gpu
def test_the_launcher_measures_the_baseline_once_after_the_engines_run(tmp_path, monkeypatch):
    """run_local's path on this machine's GPUs: the engine runs the solution (one process per
    GPU where there are several), then the launcher times the baseline once on the whole
    selection; its figures come back on the first shard and cover every workload run."""
    import torch

    from fib_core.bench.engine.shard_run import RunRequest
    from fib_core.project.runflow import execute_on_gpus

    baseline = baseline_for(DECODE)
    why = baseline.unavailable_reason(torch.cuda.get_device_capability(),
                                      torch.cuda.get_device_name())
    if why is not None:
        pytest.skip(why)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    request = RunRequest(solution=baseline.solution().to_dict(), definition=DECODE,
                         filters=None, quick=True, device="cuda",
                         engine={"allow_input_mutation": baseline.mutates_inputs})
    shards = execute_on_gpus(request, None)
    ran = {t.workload.uuid for s in shards for t in s.traces}
    figures = shards[0].baseline
    assert figures is not None and figures["reason"] is None, figures
    assert set(figures["latencies"]) | set(figures["failed"]) == ran
    assert figures["measured"] == len(ran)  # an empty cache: each timed once, here
    assert all(s.baseline is None for s in shards[1:])


def test_a_gpu_runs_finish_prints_and_keeps_the_contest_score(tmp_path):
    """What run_local/run_modal do with shards that carry baseline figures: the score line in
    the terminal, and contest_score in the --json file."""
    from rich.console import Console

    from fib_core.bench.engine.shard_run import ShardResult
    from fib_core.data import Definition
    from fib_core.project.run_finish import finish
    from fib_core.project.runflow import RunOptions

    definition = Definition.from_dict(registry.get(DECODE).definition_dict())
    traces = [_trace("w1", 0.5), _trace("w2", 0.25)]
    shard = ShardResult(shard=0, order=["w1", "w2"], traces=traces, device="cuda",
                        gpu_name=H100[0], baseline=_times({"w1": 1.0, "w2": 1.0}))
    console = Console(record=True, width=200)
    opts = RunOptions(json_path=tmp_path / "run.json", ledger=False)
    assert finish([ShardResult(**shard.to_dict())], definition, opts, console) == 0
    out = console.export_text()
    assert "contest score 3.000x vs FlashInfer flashinfer_wrapper_9b7f1e (2 of 2 workloads; " \
           "faster on 2; NVIDIA H100 80GB HBM3, flashinfer 0.7.2)" in out
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["contest_score"] == pytest.approx(3.0)
    assert saved["contest"]["baseline_latency_ms"] == {"w1": 1.0, "w2": 1.0}


def test_a_several_gpu_runs_one_baseline_on_its_first_shard_scores_every_workload(tmp_path):
    """A several-GPU run measures the baseline once, on the whole selection, and hands it
    back with its first shard (fib_core.project.runflow.execute_on_gpus): the score covers
    the workloads every GPU ran."""
    from rich.console import Console

    from fib_core.bench.engine.shard_run import ShardResult
    from fib_core.data import Definition
    from fib_core.project.run_finish import finish
    from fib_core.project.runflow import RunOptions

    definition = Definition.from_dict(registry.get(DECODE).definition_dict())
    order = ["w1", "w2", "w3"]
    shards = [ShardResult(shard=0, order=order, traces=[_trace("w2", 0.5)], device="cuda",
                          gpu_name=H100[0],
                          baseline=_times({"w1": 1.0, "w2": 1.0, "w3": 2.0})),
              ShardResult(shard=1, order=order, traces=[_trace("w3", 0.5), _trace("w1", 0.5)],
                          device="cuda", gpu_name=H100[0])]
    opts = RunOptions(json_path=tmp_path / "run.json", ledger=False)
    assert finish(shards, definition, opts, Console(record=True, width=200)) == 0
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["contest"]["baseline_latency_ms"] == {"w1": 1.0, "w2": 1.0, "w3": 2.0}
    assert saved["contest_score"] == pytest.approx((2.0 + 2.0 + 4.0) / 3)
