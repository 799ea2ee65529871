"""Contest scoring with hand-computed expectations (see the table in ``scored``)."""

from __future__ import annotations

import pytest

from fib_core.data import BaselineError, Definition, Solution, Trace, TraceSet
from fib_core.errors import SchemaError

D1, D2, D3 = "op_one", "op_two", "op_lonely"


@pytest.fixture
def scored(build) -> TraceSet:
    """Latencies (ms) per solution and workload; 'x' marks a failed trace.

    D1 (op_type toy)   w1        w2     w3   -> score vs base
      base (baseline)  2.0, 4.0  3.0    x    (w3 does not count: the baseline failed it)
      a1  (alice)      1.0, 0.5  1.5    1.0  (2/0.5 + 3/1.5) / 2 = 3.0
      a2  (alice)      2.0       3.0         (1 + 1) / 2 = 1.0      -> alice's best in D1: 3.0
      b1  (bob)        1.0       x           any failure -> 0.0
      c1  (carol)                       1.0  no workload the baseline passed -> None
    D2 (op_type other)
      base2 (baseline) 1.0
      a3  (alice)      0.5                   2.0
      d1  (dave)       0.4                   2.5
      b2  (bob)        (no traces)           None
    alice: mean(3.0, 2.0) = 2.5; dave: 2.5; bob: mean(0.0) = 0.0; carol: unscored.
    """
    ts = TraceSet()
    for name, op in ((D1, "toy"), (D2, "other"), (D3, "lonely")):
        ts.add_definition(Definition.from_dict(build.definition(name, op)))
    sols = {D1: [("base", "baseline"), ("a1", "alice"), ("a2", "alice"), ("b1", "bob"),
                 ("c1", "carol")],
            D2: [("base2", "baseline"), ("a3", "alice"), ("d1", "dave"), ("b2", "bob")],
            D3: [("e1", "eve")]}
    for def_name, entries in sols.items():
        for sol_name, author in entries:
            ts.add_solution(Solution.from_dict(build.solution(sol_name, author, def_name)))
    runs = {D1: [("base", "w1", 2.0), ("base", "w1", 4.0), ("base", "w2", 3.0), ("base", "w3", None),
                 ("a1", "w1", 1.0), ("a1", "w1", 0.5), ("a1", "w2", 1.5), ("a1", "w3", 1.0),
                 ("a2", "w1", 2.0), ("a2", "w2", 3.0),
                 ("b1", "w1", 1.0), ("b1", "w2", None),
                 ("c1", "w3", 1.0)],
            D2: [("base2", "w1", 1.0), ("a3", "w1", 0.5), ("d1", "w1", 0.4)],
            D3: [("e1", "w1", 1.0)]}
    traces = []
    for def_name, rows in runs.items():
        for sol_name, uuid, latency in rows:
            if latency is None:
                raw = build.trace(sol_name, uuid, def_name, status="INCORRECT_NUMERICAL")
            else:
                raw = build.trace(sol_name, uuid, def_name, latency=latency)
            traces.append(Trace.from_dict(raw))
    ts.add_traces(traces)
    return ts


def test_solution_scores(scored):
    assert scored.get_solution_score("a1") == pytest.approx(3.0)
    assert scored.get_solution_score("a2") == pytest.approx(1.0)
    assert scored.get_solution_score("b1") == 0.0
    assert scored.get_solution_score("c1") is None
    assert scored.get_solution_score("a3") == pytest.approx(2.0)
    assert scored.get_solution_score("b2") is None
    assert scored.get_solution_score("base") is None
    assert scored.get_solution_score("no-such-solution") is None


def test_another_baseline_author(scored):
    # Against alice's a2 as the baseline in D1 (alice has two solutions there: ambiguous).
    with pytest.raises(BaselineError, match=r"'op_one'.*baseline author 'alice', found 2 "
                                            r"\(a1, a2\)"):
        scored.get_solution_score("b1", baseline_author="alice")
    # dave has one solution in D2: a3 vs d1 = 0.4 / 0.5.
    assert scored.get_solution_score("a3", baseline_author="dave") == pytest.approx(0.8)


def test_author_scores_and_scopes(scored):
    assert scored.get_author_score("alice", op_type="toy") == pytest.approx(3.0)
    assert scored.get_author_score("alice", definition_name=D2) == pytest.approx(2.0)
    assert scored.get_author_score("bob", op_type="toy") == 0.0
    assert scored.get_author_score("carol", op_type="toy") is None
    assert scored.get_author_score("nobody", op_type="toy") is None
    with pytest.raises(ValueError, match="op_type or definition_name, not both"):
        scored.get_author_score("alice", op_type="toy", definition_name=D1)
    with pytest.raises(KeyError):
        scored.get_author_score("alice", definition_name="missing")


def test_missing_baseline_is_an_error(scored):
    with pytest.raises(ValueError, match=r"^definition 'op_lonely': expected exactly one solution "
                                         r"by baseline author 'baseline', found 0 \(none\)"):
        scored.get_solution_score("e1")
    with pytest.raises(BaselineError):
        scored.rank_authors()
    with pytest.raises(BaselineError):
        scored.get_author_score("eve")  # eve's only definition has no baseline


def test_rank_authors(scored):
    # Without the baseline-less definition in scope: alice and dave tie at 2.5 (name order).
    scored.solutions.pop(D3)
    ranked = scored.rank_authors()
    assert [a for a, _ in ranked] == ["alice", "dave", "bob"]
    assert [s for _, s in ranked] == pytest.approx([2.5, 2.5, 0.0])
    assert scored.get_author_score("alice") == pytest.approx(2.5)
    assert scored.rank_authors(op_type="other") == [("dave", pytest.approx(2.5)),
                                                    ("alice", pytest.approx(2.0))]


def test_summary_counts_and_rankings(scored):
    summary = scored.summary(op_type="toy")
    assert (summary["total"], summary["passed"], summary["failed"]) == (13, 11, 2)
    assert summary["min_latency_ms"] == 0.5 and summary["max_latency_ms"] == 4.0
    assert [r["author"] for r in summary["rankings"]] == ["alice", "bob"]
    assert summary["rankings"][0]["score"] == pytest.approx(3.0)
    assert summary["rankings_error"] is None
    # A scope without a baseline still gets its counts.
    lonely = scored.summary(op_type="lonely")
    assert (lonely["total"], lonely["passed"], lonely["rankings"]) == (1, 1, [])
    assert "found 0" in lonely["rankings_error"]


def test_passed_trace_with_bad_latency(scored, build):
    raw = build.trace("a2", "w1", D1, latency=1.0)
    raw["evaluation"]["performance"]["latency_ms"] = 0.0
    scored.add_traces([Trace.from_dict(raw)])
    with pytest.raises(ValueError) as info:
        scored.get_solution_score("a2")
    assert isinstance(info.value, SchemaError)
    assert "latency_ms: found 0.0, expected a finite latency_ms > 0" in str(info.value)
    assert "'a2'" in str(info.value) and "'w1'" in str(info.value)
