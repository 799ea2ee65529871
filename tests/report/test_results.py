"""RunResults: validation, JSON round trip, clear errors for bad files, merging shards."""

from __future__ import annotations

import json
import math

import pytest

from fib_core.errors import FibError
from fib_core.report.results import (
    CPU_SMOKE_MODE,
    GPU_MODE,
    ResultsFileError,
    RunResults,
    merge,
)
from fib_core.report.workload_result import Achieved, WorkloadResult


def test_mode_label_follows_device(mkrun):
    assert mkrun([]).mode == GPU_MODE
    cpu = mkrun([], device="cpu", gpu_name=None)
    assert cpu.mode == CPU_SMOKE_MODE and cpu.is_cpu_smoke
    assert "not comparable" in cpu.mode


def test_json_round_trip_keeps_every_field(tmp_path, mkrow, mkrun, spread):
    rows = [
        mkrow("aaaaaaaa-1", latency=0.012, axes={"batch_size": 4}, spread=spread(0.011, 0.013),
              achieved=Achieved(1234.5, "GB/s"), roofline_fraction=0.5, floor_ms=0.006,
              timing_method="cupti", warnings=["CUDA events include launch overhead"]),
        mkrow("bbbbbbbb-2", "INCORRECT_NUMERICAL", max_abs_error=math.inf,
              max_rel_error=math.nan, log_tail=["line 1", "line 2"]),
        mkrow("cccccccc-3", "TIMEOUT", reason="no result after 300 s"),
    ]
    run = mkrun(rows, author="me", environment={"hardware": "H100", "libs": {"torch": "2.11"}})
    path = run.to_json(tmp_path / "sub" / "results.json")
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]

    def no_bare_literal(token):
        raise AssertionError(f"bare {token} in a results file")

    raw = json.loads(path.read_text(), parse_constant=no_bare_literal)  # strict JSON
    # non-finite errors use the format's own strings, as traces do
    assert raw["rows"][1]["max_abs_error"] == "Infinity" and raw["rows"][1]["max_rel_error"] == "NaN"
    back = RunResults.from_json(path)
    assert back.to_dict() == run.to_dict()
    assert back.rows[0].spread.p90_ms == 0.013
    assert back.rows[0].achieved == Achieved(1234.5, "GB/s")
    assert back.rows[1].max_abs_error == math.inf and math.isnan(back.rows[1].max_rel_error)
    assert back.rows[2].reason == "no result after 300 s"
    assert back.rows[0].warnings == ["CUDA events include launch overhead"]


def test_corrupt_results_file_names_file_and_line(tmp_path, mkrow, mkrun):
    path = mkrun([mkrow("a1")]).to_json(tmp_path / "r.json")
    path.write_text(path.read_text()[:-40])  # truncated, as after a crash mid-copy
    with pytest.raises(ResultsFileError) as err:
        RunResults.from_json(path)
    msg = str(err.value)
    assert str(path) in msg and "not valid JSON" in msg and "\n" not in msg
    assert isinstance(err.value, FibError)


def test_foreign_json_is_rejected_with_hint(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"definition": "x", "workload": {}}))
    with pytest.raises(ResultsFileError, match="not a results file of this kit"):
        RunResults.from_json(path)


def test_malformed_row_and_missing_file(tmp_path, mkrow, mkrun):
    data = mkrun([mkrow("a1")]).to_dict()
    data["rows"][0]["status"] = "GREAT"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsFileError, match="malformed results file.*GREAT"):
        RunResults.from_json(path)
    with pytest.raises(ResultsFileError, match="not found"):
        RunResults.from_json(tmp_path / "nope.json")


def test_validation_rejects_nonsense(mkrow, mkrun):
    with pytest.raises(ValueError, match="needs latency_ms"):
        WorkloadResult(uuid="a1", axes={}, status="PASSED")
    with pytest.raises(ValueError, match="device"):
        mkrun([], device="tpu")
    with pytest.raises(ValueError, match="appears twice"):
        mkrun([mkrow("a1"), mkrow("a1")])
    with pytest.raises(ValueError, match="one line"):
        mkrow("a1", "RUNTIME_ERROR", reason="two\nlines")
    with pytest.raises(ValueError, match="finite"):
        mkrow("a1", latency=math.inf)


def test_merge_joins_shards_in_workload_order(mkrow, mkrun):
    a = mkrun([mkrow("u3"), mkrow("u1", latency=5.0)], created="2025-01-01T00:00:00+00:00")
    b = mkrun([mkrow("u2"), mkrow("u1", latency=7.0)], created="2025-01-02T00:00:00+00:00")
    merged = merge([a, b])
    assert [r.uuid for r in merged.rows] == ["u3", "u1", "u2"]
    assert merged.row("u1").latency_ms == 7.0  # the later shard re-ran it
    assert merged.created == "2025-01-02T00:00:00+00:00"
    ordered = merge([a, b], order=["u1", "u2", "u3"])
    assert [r.uuid for r in ordered.rows] == ["u1", "u2", "u3"]


def test_merge_refuses_mixed_runs(mkrow, mkrun):
    with pytest.raises(FibError, match="disagree on solution"):
        merge([mkrun([mkrow("u1")]), mkrun([mkrow("u2")], solution="other")])
    with pytest.raises(FibError, match="disagree on device"):
        merge([mkrun([]), mkrun([], device="cpu")])
    with pytest.raises(FibError, match="no results"):
        merge([])
