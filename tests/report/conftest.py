"""Builders for hand-made result rows and runs, shared by the report tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fib_core.report.results import RunResults, Spread, WorkloadResult


def _row(uuid: str, status: str = "PASSED", latency: float | None = None, **kw: Any) -> WorkloadResult:
    if status == "PASSED":
        latency = 1.0 if latency is None else latency
        kw.setdefault("speedup", 2.0)
        if "reference_latency_ms" not in kw:
            kw["reference_latency_ms"] = kw["speedup"] * latency if kw["speedup"] else None
        kw.setdefault("max_abs_error", 1e-3)
        kw.setdefault("max_rel_error", 2e-3)
    else:
        kw.setdefault("reason", f"{status.lower()} in {uuid}")
    axes = kw.pop("axes", {"batch_size": 1})
    return WorkloadResult(uuid=uuid, axes=axes, status=status, latency_ms=latency, **kw)


def _run(rows: list[WorkloadResult], **kw: Any) -> RunResults:
    kw.setdefault("definition", "gdn_decode_qk4_v8_d128_k_last")
    kw.setdefault("solution", "my_solution")
    kw.setdefault("gpu_name", "NVIDIA H100 80GB HBM3")
    return RunResults(rows=rows, **kw)


@pytest.fixture
def mkrow() -> Callable[..., WorkloadResult]:
    """mkrow(uuid, status="PASSED", latency=1.0, **fields): a row with plausible defaults."""
    return _row


@pytest.fixture
def mkrun() -> Callable[..., RunResults]:
    """mkrun(rows, **fields): a GPU run of one solution on GDN decode."""
    return _run


@pytest.fixture
def spread() -> Callable[..., Spread]:
    return lambda p10, p90: Spread(p10_ms=p10, p90_ms=p90, std_ms=(p90 - p10) / 2.5, min_ms=p10)
