"""The contest rule: mean speedup over workloads, 0 when any workload failed."""

from __future__ import annotations

import pytest

from fib_core.report.summary import Summary, summarize


def test_score_is_mean_speedup_when_all_pass(mkrow, mkrun):
    run = mkrun([mkrow("a", speedup=1.0), mkrow("b", speedup=2.0), mkrow("c", speedup=4.5)])
    s = summarize(run)
    assert s.score == pytest.approx(2.5)  # (1 + 2 + 4.5) / 3
    assert (s.passed, s.total, s.failed) == (3, 3, 0) and s.all_passed


def test_one_failure_scores_zero_but_keeps_passing_mean(mkrow, mkrun):
    run = mkrun([mkrow("a", speedup=3.0), mkrow("b", speedup=5.0), mkrow("c", "TIMEOUT")])
    s = summarize(run)
    assert s.score == 0.0
    assert (s.passed, s.total, s.failed) == (2, 3, 1) and not s.all_passed
    assert s.mean_speedup_passed == pytest.approx(4.0)


def test_slowest_lists_passing_workloads_by_latency(mkrow, mkrun):
    run = mkrun([
        mkrow("a", latency=0.5), mkrow("b", latency=3.0), mkrow("c", "RUNTIME_ERROR"),
        mkrow("d", latency=1.5), mkrow("e", latency=0.1),
    ])
    assert summarize(run).slowest == [("b", 3.0), ("d", 1.5), ("a", 0.5)]
    assert summarize(run, n_slowest=1).slowest == [("b", 3.0)]


def test_empty_run_scores_zero(mkrun):
    s = summarize(mkrun([]))
    assert (s.score, s.total, s.mean_speedup_passed, s.all_passed) == (0.0, 0, None, False)


def test_passed_row_without_speedup_is_not_scored(mkrow, mkrun):
    run = mkrun([mkrow("a", speedup=2.0), mkrow("b", speedup=None, reference_latency_ms=None)])
    assert summarize(run).score == 0.0


def test_summary_validates_counts():
    with pytest.raises(ValueError, match="must equal"):
        Summary(score=1.0, passed=2, total=3, failed=0)
