"""A CPU run keeps the quick subset unless workloads were named: named ones run as named."""

from __future__ import annotations

from types import SimpleNamespace

from fib_core.bench.engine.shard_run import RunRequest, select_for
from fib_core.data import Trace, TraceSet
from fib_core.dataset import embedded_dataset_path
from fib_core.dataset.selection import select_workloads
from fib_core.project.recording import run_config

DECODE = "gdn_decode_qk4_v8_d128_k_last"
INDEXER = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"


def _request(filters: list[str] | None, quick: bool = False, definition: str = DECODE
             ) -> RunRequest:
    return RunRequest(solution={}, definition=definition, filters=filters, quick=quick,
                      engine={}, device="cpu")


def _untagged(records: list[Trace]) -> list[Trace]:
    """The records as the organizers' dataset has them: no "quick" tags."""
    dicts = [t.to_dict() for t in records]
    for d in dicts:
        d["workload"].pop("tags", None)
    return [Trace.from_dict(d) for d in dicts]


def _shapes(records: list[Trace]) -> list[tuple[int, int]]:
    return sorted((t.workload.axes["batch_size"], t.workload.axes["max_num_pages"])
                  for t in records)


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


def test_an_untagged_quick_subset_is_the_smallest_by_the_roofline() -> None:
    """Without tags the quick subset is the three smallest workloads: by the definition's
    roofline size in a run (the indexer's third is one request of 3 pages), by the product of
    the axes where no definition, or none with a cost model, is named (two requests of 1 page)."""
    records = _untagged(TraceSet.from_path(embedded_dataset_path()).workloads[INDEXER])
    assert not any(t.workload.tags for t in records)
    run = select_for(_request(None, definition=INDEXER), SimpleNamespace(workloads={INDEXER: records}),
                     "cpu")
    assert _shapes(run) == [(1, 1), (1, 2), (1, 3)]
    assert _shapes(select_workloads(records, None, quick=True, definition=INDEXER)) == _shapes(run)
    by_axes = [(1, 1), (1, 2), (2, 1)]
    assert _shapes(select_workloads(records, None, quick=True)) == by_axes
    assert _shapes(select_workloads(records, None, quick=True, definition="no_model")) == by_axes
