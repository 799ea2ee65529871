"""Builders for hand-made result rows and runs, shared by the report tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fib_core.report.results import RunResults
from fib_core.report.workload_result import Spread, WorkloadResult


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


@pytest.fixture
def mkrecord(mkrun, mkrow, spread) -> Callable[..., Any]:
    """mkrecord(latencies={batch: ms}, failed={batch: reason}, commit=, solution_hash=, ...):
    a ledger record of a GDN decode GPU run, one workload per batch size (uuid ``wl-b<batch>``),
    with a 4 % p10-p90 band, reference 3x slower and a roofline fraction of 0.5."""
    from fib_core.report.ledger import GitState, new_record

    def make(
        latencies: dict[int, float],
        *,
        failed: dict[int, str] | None = None,
        commit: str = "a" * 40,
        dirty: bool = False,
        solution_hash: str = "1" * 64,
        config: dict[str, Any] | None = None,
        device: str = "cuda",
        cross_check: list[dict[str, Any]] | None = None,
    ) -> Any:
        rows = []
        for batch, ms in latencies.items():
            rows.append(
                mkrow(
                    f"wl-b{batch}",
                    latency=ms,
                    speedup=3.0,
                    axes={"batch_size": batch},
                    spread=spread(ms * 0.98, ms * 1.02),
                    roofline_fraction=0.5,
                    floor_ms=ms * 0.5,
                )
            )
        for batch, reason in (failed or {}).items():
            rows.append(
                mkrow(
                    f"wl-b{batch}",
                    "INCORRECT_NUMERICAL",
                    axes={"batch_size": batch},
                    reason=reason,
                    log_tail=["max abs error 0.5 at (0, 1)"],
                )
            )
        gpu = "NVIDIA H100 80GB HBM3" if device == "cuda" else None
        results = mkrun(
            rows,
            device=device,
            gpu_name=gpu,
            environment={"hardware": gpu or "CPU", "libs": {"torch": "2.8.0", "triton": "3.4.0"}},
        )
        return new_record(
            results,
            root=None,
            solution_name="my_solution",
            solution_hash=solution_hash,
            config=config if config is not None else {"engine": {"iterations": 50}},
            git=GitState(commit, dirty, "main"),
            cross_check=cross_check,
        )

    return make
