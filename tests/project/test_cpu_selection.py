"""A CPU run keeps the quick subset unless workloads were named: named ones run as named."""

from __future__ import annotations

from fib_core.data import TraceSet
from fib_core.dataset import embedded_dataset_path
from fib_core.project.recording import run_config
from fib_core.project.runflow import RunRequest, select_for

DECODE = "gdn_decode_qk4_v8_d128_k_last"


def _request(filters: list[str] | None, quick: bool = False) -> RunRequest:
    return RunRequest(solution={}, definition=DECODE, filters=filters, quick=quick, engine={},
                      device="cpu")


def test_named_workloads_win_over_the_cpu_quick_subset() -> None:
    ts = TraceSet.from_path(embedded_dataset_path())
    batch1 = [t for t in ts.workloads[DECODE] if t.workload.axes["batch_size"] == 1]
    assert len(batch1) > 3
    named = _request(["batch_size=1"])
    assert len(select_for(named, ts, "cpu")) == len(batch1)
    assert not named.uses_quick_subset("cpu") and run_config(named)["quick"] is False
    default = _request(None)
    assert len(select_for(default, ts, "cpu")) == 3 and run_config(default)["quick"] is True
    # --quick still narrows named workloads; a GPU run without a filter runs every workload
    assert len(select_for(_request(["batch_size=1"], quick=True), ts, "cpu")) < len(batch1)
    assert len(select_for(_request(None), ts, "cuda")) == len(ts.workloads[DECODE])
