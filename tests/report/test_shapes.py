"""Results read per shape: medians and spreads, the headline score, the terminal's shape table,
and the measurement conditions (clocks, L2, the roofline's peak) read from a trace."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from fib_core.report.baseline import baseline_speedups, contest_score
from fib_core.report.headline import headline, score_text
from fib_core.report.render import render_results
from fib_core.report.results import RunResults
from fib_core.report.rows import clocks_text
from fib_core.report.shapes import by_shape, plot_axis, shape_axes


def decode_run(mkrow, mkrun, *, baseline: bool = False):
    """Batch 1 three times (reference 2 ms to 5 ms), batch 16 twice, batch 4 once, out of order."""
    spec = [(1, 0.002, 2.0), (16, 0.010, 40.0), (1, 0.003, 5.0), (4, 0.004, 9.0), (1, 0.0025, 3.0),
            (16, 0.012, 44.0)]
    rows = [
        mkrow(f"w{i}", latency=ms, speedup=ref / ms, reference_latency_ms=ref,
              axes={"batch_size": batch, "num_heads": 8}, floor_ms=ms / 2, roofline_fraction=0.5)
        for i, (batch, ms, ref) in enumerate(spec)
    ]
    run = mkrun(rows)
    if baseline:  # as a run that timed the baseline records it (the score left to the report)
        run.contest = {"baseline": "flashinfer_wrapper_9b7f1e",
                       "baseline_latency_ms": {f"w{i}": ms * 1.5 for i, (_, ms, _) in
                                               enumerate(spec)}}
    return run


def test_rows_group_by_the_varying_axis_in_numeric_order(mkrow, mkrun):
    run = decode_run(mkrow, mkrun)
    assert shape_axes(run.rows) == ["batch_size"] and plot_axis(run.rows) == "batch_size"
    shapes = by_shape(run)
    assert [s.label for s in shapes] == ["batch_size=1", "batch_size=4", "batch_size=16"]
    one = shapes[0]
    assert (one.workloads, one.passed) == (3, 3)
    assert (one.kernel.median, one.kernel.low, one.kernel.high) == (0.0025, 0.002, 0.003)
    assert one.reference.ratio == pytest.approx(2.5)  # 5 ms / 2 ms
    assert shapes[2].kernel.median == pytest.approx(0.011)  # median of two: their mean
    assert shapes[1].kernel.n == 1 and shapes[1].kernel.ratio == 1.0


def test_a_failed_workload_counts_in_its_shape_but_not_in_its_figures(mkrow, mkrun):
    run = mkrun([mkrow("a", latency=0.002, axes={"batch_size": 1}),
                 mkrow("b", "RUNTIME_ERROR", axes={"batch_size": 1})])
    (shape,) = by_shape(run)
    assert (shape.workloads, shape.passed, shape.kernel.n) == (2, 1, 1)


def test_headline_without_baseline_is_the_reference_speedup_named_so(mkrow, mkrun):
    h = headline(decode_run(mkrow, mkrun))
    assert h.kind == "reference" and h.title.startswith("Speedup over the reference ")
    assert "contest" not in h.title.lower()
    assert any(d.startswith("not the contest score") for d in h.details)
    noise = next(d for d in h.details if d.startswith("the reference itself"))
    assert "2.50x" in noise and "batch_size=1: 2.000 ms to 5.000 ms" in noise


def test_headline_with_baseline_is_the_contest_score(mkrow, mkrun):
    run = decode_run(mkrow, mkrun, baseline=True)
    assert baseline_speedups(run)["w0"] == pytest.approx(1.5)
    assert contest_score(run) == pytest.approx(1.5)
    h = headline(run)
    assert h.kind == "contest" and h.title.startswith("Contest score 1.50x (mean speedup over "
                                                      "the FlashInfer baseline, 6 workloads)")
    assert any(d.startswith("speedup over the reference: mean") for d in h.details)
    assert "baseline: flashinfer_wrapper_9b7f1e" in h.details
    assert score_text(run) == "1.50x (contest)"


def test_a_score_the_results_carry_wins_and_a_failure_scores_zero(mkrow, mkrun):
    run = decode_run(mkrow, mkrun, baseline=True)
    run.contest_score = 1.23  # a run that scored itself: its figure is the one shown
    run.contest.update(score=1.23, compared=5, selected=6)
    assert contest_score(run) == 1.23
    assert headline(run).title == ("Contest score 1.23x (mean speedup over the FlashInfer "
                                   "baseline, 5 of 6 workloads)")
    unscored = decode_run(mkrow, mkrun)
    unscored.contest = {"score": None, "reason": "flashinfer-python is not installed"}
    assert contest_score(unscored) is None
    assert ("not the contest score: the contest divides the FlashInfer baseline's latency "
            "(flashinfer-python is not installed)") in headline(unscored).details
    failing = decode_run(mkrow, mkrun, baseline=True)
    failing.rows.append(mkrow("bad", "INCORRECT_NUMERICAL"))
    assert contest_score(failing) == 0.0
    assert headline(failing).title == "Contest score 0 (1 of 7 workloads failed)"


def test_cpu_smoke_run_has_no_score_whatever_it_carries(mkrow, mkrun):
    run = decode_run(mkrow, mkrun, baseline=True)
    cpu = RunResults(definition=run.definition, solution="s", device="cpu", rows=run.rows)
    assert headline(cpu).kind == "none" and score_text(cpu) == "-"


def test_terminal_prints_one_line_per_shape_and_the_reference_noise(mkrow, mkrun):
    buf = io.StringIO()
    render_results(decode_run(mkrow, mkrun, baseline=True), Console(file=buf, width=160))
    out = buf.getvalue()
    assert "Per shape" in out
    shape_lines = [ln for ln in out.splitlines() if ln.startswith("| batch_size=")]
    assert len(shape_lines) == 3
    assert "2.50 us" in shape_lines[0] and "2.00-3.00 us" in shape_lines[0]
    assert "2.50x" in shape_lines[0]  # the reference's own spread within batch 1
    # the run prints the contest score's own line after this summary: it is not repeated here
    assert "Score: 2297.22x (mean speedup over the reference, 6 workloads)\n" in out
    assert "Contest score" not in out
    assert "the reference itself varies up to 2.50x between workloads of one shape" in out


def test_clocks_line_reads_what_nvidia_smi_reported():
    assert clocks_text({"clocks_sm": "1755", "clocks_max_sm": "1980", "clocks_mem": "2619"}) == (
        "SM 1755/1980 MHz, mem 2619 MHz")
    assert clocks_text({"clocks_sm": "[N/A]", "clocks_mem": "1593"}) == "mem 1593 MHz"
    assert clocks_text({}) is None and clocks_text(None) is None


def test_a_cpu_run_shape_table_leaves_out_what_it_did_not_measure(mkrow, mkrun):
    rows = [mkrow(f"c{i}", latency=5000.0 + 1000 * i, speedup=None, reference_latency_ms=None,
                  axes={"batch_size": 1 + i % 2}) for i in range(4)]
    buf = io.StringIO()
    render_results(mkrun(rows, device="cpu", gpu_name=None), Console(file=buf, width=160))
    out = buf.getvalue()
    header = next(ln for ln in out.splitlines() if ln.startswith("| shape"))
    assert "latency" in header and "spread" in header
    assert "reference" not in header and "roofline" not in header and "vs ref" not in header
    line = next(ln for ln in out.splitlines() if ln.startswith("| batch_size=1 "))
    assert line.split("|")[2:6] == [" 2 ", "    2/2 ", "  6.00 s ", " 5.00-7.00 s "]
