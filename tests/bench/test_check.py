"""check_outputs: the organizers' rule, NaN/inf on either side, structure, poison, mutation."""

from __future__ import annotations

import torch

from fib_core.bench.evaluation.check import check_outputs, mutated_inputs, poison_
from fib_core.bench.evaluation.compare import compare_tensor
from fib_core.checking import Tolerance

TOL = Tolerance(atol=1e-2, rtol=1e-2, required_matched_ratio=1.0)


def test_an_element_fails_only_when_both_atol_and_rtol_are_exceeded():
    want = torch.tensor([100.0, 0.001, 1.0, 1.0])
    got = torch.tensor([100.5, 0.005, 1.0, 1.02])
    # 100.5: abs 0.5 > atol but rel 0.005 <= rtol -> ok; 0.005: rel huge but abs 0.004 -> ok;
    # 1.02: abs 0.02 > atol and rel 0.02 > rtol -> fails.
    cmp = compare_tensor("o", got, want, TOL)
    assert cmp.failed == 1 and cmp.first_failures == [[3]]
    assert abs(cmp.max_abs - 0.5) < 1e-5


def test_matched_ratio_lets_some_elements_fail(toy_definition):
    want = torch.zeros(4, 16)
    got = want.clone()
    got[0, :2] = 5.0  # 2 of 64 elements wrong
    strict = check_outputs(toy_definition, [got], [want], tolerance=TOL)
    loose = check_outputs(toy_definition, [got], [want],
                          tolerance=Tolerance(1e-2, 1e-2, required_matched_ratio=0.95))
    assert strict.status.value == "INCORRECT_NUMERICAL" and loose.status.value == "PASSED"
    assert strict.correctness.max_absolute_error == 5.0


def test_mismatch_report_says_how_many_where_and_worst(toy_definition):
    want = torch.zeros(4, 16)
    got = want.clone()
    got[1, 3] = 0.5
    got[2, 7] = -3.0
    res = check_outputs(toy_definition, [got], [want], tolerance=TOL)
    msg = res.message
    assert "2 of 64 elements" in msg
    assert "first at [1, 3], [2, 7]" in msg
    assert "worst |err| 3 at [2, 7] (got -3, expected 0)" in msg
    stats = res.correctness.extra["outputs"]["out"]
    assert stats["failed"] == 2 and stats["worst"]["index"] == [2, 7]


def test_nan_on_either_side_fails_and_is_reported(toy_definition):
    want = torch.ones(4, 16)
    got = want.clone()
    got[0, 0] = float("nan")
    res = check_outputs(toy_definition, [got], [want], tolerance=Tolerance(1, 1, 0.5))
    assert res.status.value == "INCORRECT_NUMERICAL"  # even with a loose matched ratio
    assert "1 NaN in the solution's output" in res.message
    bad_ref = want.clone()
    bad_ref[3, 3] = float("nan")
    res = check_outputs(toy_definition, [want.clone()], [bad_ref], tolerance=TOL)
    assert res.status.value == "INCORRECT_NUMERICAL"
    assert "NaN in the reference output" in res.message


def test_inf_matches_only_the_same_inf(toy_definition):
    want = torch.zeros(4, 16)
    want[0, 0] = float("-inf")
    same = want.clone()
    res = check_outputs(toy_definition, [same], [want], tolerance=TOL)
    assert res.passed and "1 matching inf" in res.message
    flipped = want.clone()
    flipped[0, 0] = float("inf")
    assert check_outputs(toy_definition, [flipped], [want], tolerance=TOL).status.value == \
        "INCORRECT_NUMERICAL"
    extra_inf = torch.zeros(4, 16)
    extra_inf[1, 1] = float("inf")
    res = check_outputs(toy_definition, [extra_inf], [torch.zeros(4, 16)], tolerance=TOL)
    assert "1 inf not matched" in res.message


def test_structure_count_shape_dtype(toy_definition):
    want = torch.zeros(4, 16)
    assert check_outputs(toy_definition, [], [want], tolerance=TOL).status.value == \
        "INCORRECT_SHAPE"
    assert check_outputs(toy_definition, [torch.zeros(4, 15)], [want],
                         tolerance=TOL).status.value == "INCORRECT_SHAPE"
    res = check_outputs(toy_definition, [torch.zeros(4, 16, dtype=torch.float16)], [want],
                        tolerance=TOL)
    assert res.status.value == "INCORRECT_DTYPE" and "float16, expected float32" in res.message
    assert res.correctness is None


def test_poison_makes_unwritten_elements_fail():
    f = poison_(torch.zeros(3, dtype=torch.bfloat16))
    i = poison_(torch.zeros(3, dtype=torch.int32))
    b = poison_(torch.zeros(3, dtype=torch.bool))
    assert torch.isnan(f.float()).all()
    assert (i == torch.iinfo(torch.int32).min).all()
    assert not b.any()  # no invalid bool exists: left as is
    e4 = poison_(torch.zeros(2, dtype=torch.float8_e4m3fn))
    assert torch.isnan(e4.float()).all()


def test_mutated_inputs_bitwise_and_nan_safe():
    a = torch.tensor([1.0, float("nan")])
    assert mutated_inputs(["a", "s"], [a, 2.0], [a.clone(), 2.0]) == []
    changed = a.clone()
    changed[0] = 1.0000001
    assert mutated_inputs(["a", "s"], [a, 2.0], [changed, 2.0]) == ["a"]
