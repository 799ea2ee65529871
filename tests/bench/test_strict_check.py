"""The strict view: each output's error against its own scale, and the --strict check that
fails what the definition's atol hides (the judge's rule is untouched)."""

from __future__ import annotations

import io

import pytest
import torch
from rich.console import Console

from fib_core.bench.evaluation.compare import (
    compare_tensor,
    loose_tolerance,
    strict_atol,
    strict_problems,
)
from fib_core.checking import Tolerance
from fib_core.data import Trace
from fib_core.project.strict_view import print_correctness_view

GDN = Tolerance(atol=0.01, rtol=0.01, required_matched_ratio=1.0)
MOE = Tolerance(atol=1.0, rtol=0.3, required_matched_ratio=0.9)


def _gdn_like_output(seed: int = 0) -> torch.Tensor:
    """fp32 values of GDN decode's size (about 0.03), before rounding to bf16."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(16, 1, 8, 128, generator=g) * 0.03


def _extra(got: torch.Tensor, want: torch.Tensor, tol: Tolerance) -> dict:
    c = compare_tensor("output", got, want, tol)
    return {"checker": "elementwise", "tolerance": tol.to_dict(), "outputs": {"output": c.to_dict()}}


def test_figures_against_the_outputs_scale() -> None:
    want = torch.tensor([3.0, -4.0, 0.0, 0.0])  # RMS 2.5
    got = torch.tensor([3.3, -4.4, 0.0, 0.0])  # 10 % off
    c = compare_tensor("o", got, want, GDN)
    assert c.scale == pytest.approx(2.5)
    assert c.rel_l2 == pytest.approx(0.1, rel=1e-5)
    assert c.bias == pytest.approx(0.1, rel=1e-5)
    assert c.max_over_scale == pytest.approx(0.4 / 2.5, rel=1e-5)
    assert c.failed == 2 and c.strict_failed == 2


@pytest.mark.parametrize("factor", [1.01, 1.2])
def test_a_scaled_gdn_output_passes_the_judge_but_not_strict(factor: float) -> None:
    exact = _gdn_like_output()
    want = exact.to(torch.bfloat16)
    got = (exact * factor).to(torch.bfloat16)
    extra = _extra(got, want, GDN)
    out = extra["outputs"]["output"]
    if factor == 1.01:
        assert out["failed"] == 0  # the judge's rule lets it through
    problems = strict_problems(extra)
    assert len(problems) == 1, problems
    assert "relative L2 error" in problems[0] or "too large throughout" in problems[0]
    if factor == 1.2:
        assert "relative L2 error 2.0" in problems[0]


def test_a_bf16_output_one_percent_too_large_is_a_scale_error() -> None:
    """As a kernel doing ``output.mul_(1.01)`` in bf16: the product rounds back to bf16, so the
    L2 error lands near the noise floor; the bias does not."""
    want = _gdn_like_output().to(torch.bfloat16)
    got = want.clone().mul_(1.01)
    extra = _extra(got, want, GDN)
    assert extra["outputs"]["output"]["rel_l2"] < 0.01
    assert 0.005 < extra["outputs"]["output"]["bias"] < 0.012
    assert "too large throughout" in strict_problems(extra)[0]


def test_rounding_and_reordering_noise_passes_strict() -> None:
    """A correct kernel: the same values computed in another order in fp32, then bf16."""
    exact = _gdn_like_output(1)
    noise = 1 + 1e-5 * torch.randn(exact.shape, generator=torch.Generator().manual_seed(2))
    want = exact.to(torch.bfloat16)
    got = (exact * noise).to(torch.bfloat16)
    assert strict_problems(_extra(got, want, GDN)) == []
    # fp32 values a bf16 rounding step apart here and there, either way: still within.
    sign = torch.randint(-1, 2, exact.shape, generator=torch.Generator().manual_seed(5))
    got = (exact * (1 + sign * 2.0**-8)).to(torch.bfloat16)
    extra = _extra(got, want, GDN)
    assert 0.002 < extra["outputs"]["output"]["rel_l2"] < 0.01
    assert strict_problems(extra) == []


def test_truncating_to_bf16_as_tritons_cpu_interpreter_does_passes_strict() -> None:
    """The interpreter drops fp32's low bits instead of rounding: every output is up to one bf16
    step small (a 0.2-0.4 % scale error), and a correct starter must still pass."""
    exact = _gdn_like_output(6)
    want = exact.to(torch.bfloat16)
    bits = exact.view(torch.int32) & ~0xFFFF  # round toward zero
    got = bits.view(torch.float32).to(torch.bfloat16)
    extra = _extra(got, want, GDN)
    assert -0.005 < extra["outputs"]["output"]["bias"] < -0.001
    assert strict_problems(extra) == []


def test_a_few_wrong_elements_fail_strict_through_the_capped_atol() -> None:
    exact = _gdn_like_output(3)
    want = exact.to(torch.bfloat16)
    got = exact.clone()
    scale = exact.pow(2).mean().sqrt()
    typical = (exact.abs() - scale).abs().argmin()
    got.view(-1)[typical] *= 1.25  # one typical element 25 % off: within atol, small in L2
    got = got.to(torch.bfloat16)
    extra = _extra(got, want, GDN)
    assert extra["outputs"]["output"]["failed"] == 0
    problems = strict_problems(extra)
    assert len(problems) == 1 and "1 of 16384 elements" in problems[0], problems


def test_strict_keeps_the_definitions_rtol_and_outlier_share() -> None:
    """MoE's rule allows 10 % outliers beyond 30 %: strict allows them too."""
    g = torch.Generator().manual_seed(4)
    want = torch.randn(4096, generator=g) * 50
    got = want.clone()
    got[:200] *= 2.0  # 5 % of the elements twice as large
    extra = _extra(got, want, MOE)
    assert 150 < extra["outputs"]["output"]["strict_failed"] <= 200  # the tiny ones pass
    assert strict_problems(extra) == []
    assert strict_atol(MOE, 50.0) == 1.0 and strict_atol(GDN, 0.0) == 0.01


def test_loose_tolerance_names_the_output_and_its_share() -> None:
    exact = _gdn_like_output()
    name, atol, scale, share = loose_tolerance(_extra(exact, exact, GDN))
    assert name == "output" and atol == 0.01 and 0.2 < share < 0.5
    big = exact * 100
    assert loose_tolerance(_extra(big, big, GDN)) is None


def _trace(uuid: str, extra: dict, status: str = "PASSED") -> Trace:
    return Trace.from_dict({
        "definition": "gdn_decode_qk4_v8_d128_k_last", "solution": "mine",
        "workload": {"uuid": uuid, "axes": {"batch_size": 2}, "inputs": {}},
        "evaluation": {
            "status": status, "log": "", "timestamp": "2026-01-01T00:00:00",
            "environment": {"hardware": "cpu", "libs": {}},
            "correctness": {"max_relative_error": 0.0, "max_absolute_error": 0.0,
                            "extra": extra},
            "performance": {"latency_ms": 12.0, "reference_latency_ms": 0.0,
                            "speedup_factor": 0.0, "reference_timing": {"skipped": True},
                            "iterations": 1, "num_trials": 1},
            "device": "cpu"}})


def test_the_view_warns_once_and_strict_fails_only_what_it_must() -> None:
    exact = _gdn_like_output()
    want = exact.to(torch.bfloat16)
    good = _trace("aaaaaaaa-1", _extra(want, want, GDN))
    off = _trace("bbbbbbbb-2", _extra((exact * 1.2).to(torch.bfloat16), want, GDN))
    buf = io.StringIO()
    console = Console(file=buf, width=200)
    assert print_correctness_view([good, off], console) == []  # without --strict: a view
    text = buf.getvalue()
    assert "rel L2" in text and "max err / typical" in text and "bbbbbbbb" in text
    assert text.count("warning: atol=0.01 is ") == 1 and "--strict" in text
    buf.truncate(0)
    assert print_correctness_view([good, off], console, strict=True) == ["bbbbbbbb-2"]
    assert "strict check: 1 of 2 workloads fail" in buf.getvalue()
