"""What a new contestant reads: fitted tables, reasons once, who failed, why a PASSED row shows
a large error, paths of their own files, and comparisons that need a spread."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from fib_core.compile.source_map import map_solution_paths
from fib_core.data.trace import Correctness
from fib_core.report.attribution import reason_for
from fib_core.report.compare import ONE_SAMPLE, compare
from fib_core.report.render import render_results
from fib_core.report.rows import failure_reason
from fib_core.report.table_fit import fit_columns
from fib_core.report.verdict_notes import decided_by
from fib_core.report.workload_result import Achieved

REPO = Path(__file__).resolve().parents[2]


def terminal(width: int) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=width, force_terminal=True, color_system=None), buf


def wide_run(mkrow, mkrun):
    axes = {"batch_size": 64, "num_heads": 8, "seq_len": 4096}
    return mkrun([
        mkrow("aaaaaaaa-0001", latency=0.0072, speedup=3.0, axes=axes, roofline_fraction=0.42,
              achieved=Achieved(1500.0, "GB/s")),
        mkrow("bbbbbbbb-0002", "INCORRECT_NUMERICAL", axes=axes, max_abs_error=12.5,
              max_rel_error=0.75, reason="output 'y': 3 of 4096 elements exceed atol"),
    ])


def test_table_fits_80_columns_dropping_least_important_first(mkrow, mkrun):
    console, buf = terminal(80)
    render_results(wide_run(mkrow, mkrun), console)
    out = buf.getvalue()
    lines = out.splitlines()
    rows = [ln for ln in lines if re.match(r"\s*(aaaaaaaa|bbbbbbbb)\s{2}", ln)]  # table rows
    assert len(rows) == 2 and max(len(ln) for ln in rows) <= 80  # (a failure's reason is
    # printed whole on its own line, for the terminal to wrap)
    row = next(ln for ln in lines if "bbbbbbbb" in ln)
    assert "INCORRECT_NUMERICAL" in row  # status and uuid never truncated
    assert "42% (1500.0 GB/s)" not in out  # roofline went first
    assert "hidden to fit 80 columns; --wide shows them" in out
    wide_console, wide_buf = terminal(80)
    render_results(wide_run(mkrow, mkrun), wide_console, wide=True)
    assert "roofline" in wide_buf.getvalue() and "hidden" not in wide_buf.getvalue()


def test_fit_columns_drop_order():
    cols = {"workload": ["a" * 8], "status": ["PASSED"], "roofline": ["x" * 30],
            "abs err": ["1.0e-03"], "rel err": ["1.0e-03"]}
    assert fit_columns(cols, 200) == list(cols)
    assert fit_columns(cols, 50) == ["workload", "status", "abs err", "rel err"]
    assert fit_columns(cols, 31) == ["workload", "status", "rel err"]
    assert fit_columns(cols, 30) == ["workload", "status"]
    assert fit_columns(cols, 10, wide=True) == list(cols)


def test_each_failure_reason_printed_once(mkrow, mkrun):
    reason = "RuntimeError: CUDA error: an illegal memory access was encountered"
    run = mkrun([mkrow("cccccccc-0003", "RUNTIME_ERROR", reason=reason,
                       log_tail=["Traceback (most recent call last):", reason])])
    console, buf = terminal(160)
    render_results(run, console)
    assert buf.getvalue().count("an illegal memory access") == 1


def test_reference_timeout_is_named_as_the_reference(mkrow, mkrun):
    log = ("timed out after 600 s for the workload, in phase 'reference-timing' "
           "(killed the worker)")
    reason = failure_reason("TIMEOUT", log, {})
    assert reason.startswith("reference too slow, not your kernel")
    assert "--timeout 600 s" in reason and "raise --timeout" in reason
    assert reason_for("TIMEOUT", log.replace("reference-timing", "reference")) is not None
    # The kernel's own phases stay the kernel's.
    for phase in ("build", "run", "timing"):
        assert reason_for("TIMEOUT", log.replace("reference-timing", phase)) is None
    run = mkrun([mkrow("dddddddd-0004", "TIMEOUT", reason=reason)])
    console, buf = terminal(160)
    render_results(run, console)
    assert "TIMEOUT (reference)" in buf.getvalue()
    failed_ref = "reference failed (not the solution's fault):\nValueError: boom"
    assert failure_reason("RUNTIME_ERROR", failed_ref, {}).startswith(
        "reference failed, not your kernel")


def test_passed_row_with_large_relative_error_is_explained(mkrow, mkrun):
    corr = Correctness(max_relative_error=660.0, max_absolute_error=0.004, extra={
        "checker": "elementwise",
        "tolerance": {"atol": 0.01, "rtol": 0.01, "required_matched_ratio": 1.0},
        "outputs": {"output": {"matched_ratio": 1.0}},
    })
    text = decided_by(corr)
    assert "matched ratio 1 >= required 1" in text and "atol=0.01" in text
    assert "near-zero" in text
    partial = Correctness(max_relative_error=42.0, max_absolute_error=1e4, extra={
        **corr.extra, "outputs": {"output": {"matched_ratio": 0.952706}},
        "tolerance": {"atol": 1.0, "rtol": 0.3, "required_matched_ratio": 0.9}})
    assert decided_by(partial).startswith("matched ratio 0.952706 >= required 0.9: the "
                                          "definition lets a share of elements exceed atol=1")
    small = Correctness(max_relative_error=0.02, max_absolute_error=1e-4, extra=corr.extra)
    assert decided_by(small) == "" and decided_by(corr, "INCORRECT_NUMERICAL") == ""
    run = mkrun([mkrow("aaaaaaaa-0001", max_rel_error=660.0, decided_by=text)])
    console, buf = terminal(200)
    render_results(run, console)
    assert "note: aaaaaaaa passed with rel err 6.6e+02: matched ratio 1" in buf.getvalue()


def test_tracebacks_name_the_contestants_files():
    log = ('Traceback (most recent call last):\n'
           '  File "/tmp/fib-py-k2j3_x/fib_solution_0a1b2c3d4e5f_4242_3/kernel.py", line 42, in run\n'
           '  File "/tmp/fib-py-k2j3_x/fib_solution_0a1b2c3d4e5f_4242_3/sub/util.py", line 7\n'
           'IndexError: index 9 is out of bounds\n')
    mapped = map_solution_paths(log, "solution/triton")
    assert '"solution/triton/kernel.py", line 42' in mapped
    assert '"solution/triton/sub/util.py", line 7' in mapped
    assert "fib-py-" not in mapped and "fib_solution_" not in mapped
    assert '"kernel.py", line 42' in map_solution_paths(log)
    assert map_solution_paths("no paths here") == "no paths here"


def test_one_sample_gives_no_verdict(mkrow, mkrun, spread):
    prev = mkrun([mkrow("a", latency=1.0, samples=1), mkrow("b", latency=1.0, samples=50,
                                                          spread=spread(0.98, 1.02))])
    cur = mkrun([mkrow("a", latency=1.46, samples=1), mkrow("b", latency=1.46, samples=50,
                                                           spread=spread(1.44, 1.48))])
    d = {x.uuid: x for x in compare(cur, prev)}
    assert d["a"].verdict == ONE_SAMPLE and not d["a"].outside_noise
    assert round(d["a"].change_pct) == 46
    assert d["b"].verdict == "slower"


def test_compare_script_offline(mkrow, mkrun, spread, tmp_path):
    base = mkrun([mkrow("aaaaaaaa-0001", latency=1.0, samples=50, spread=spread(0.99, 1.01))])
    new = mkrun([mkrow("aaaaaaaa-0001", latency=0.8, samples=50, spread=spread(0.79, 0.81))])
    base.to_json(tmp_path / "A.json")
    new.to_json(tmp_path / "B.json")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "compare.py"),
                           str(tmp_path / "A.json"), str(tmp_path / "B.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "-20.0%" in proc.stdout and "Compared with previous: 1 faster" in proc.stdout
    (tmp_path / "bad.json").write_text("{")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "compare.py"),
                           str(tmp_path / "A.json"), str(tmp_path / "bad.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert json.loads((tmp_path / "A.json").read_text())["rows"][0]["samples"] == 50
