"""Every Triton starter through the kit's own flow on CPU: pack, build, run the quick subset
under Triton's interpreter, check against the embedded dataset's reference.

This is the CPU smoke run a contestant without a GPU gets from ``run_local.py`` after switching
tracks; the GPU runs of the same flow cover every workload.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fib_core.project.runflow import RunOptions, execute, make_request
from fib_core.project.switch import switch_track
from fib_core.project.workspace import open_workspace

pytestmark = pytest.mark.slow

# (definition, workload filter): the quick subset, except MoE, whose full-size reference and
# interpreted kernel take minutes per workload on a CPU: its smallest workload only.
CASES = [
    ("gdn_prefill_qk4_v8_d128_k_last", None),
    ("dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64", None),
    ("dsa_topk_indexer_fp8_h64_d128_topk2048_ps64", None),
    ("moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048", ["seq_len=1"]),
]


@pytest.mark.parametrize(
    ("definition", "filters"),
    CASES,
    ids=[c[0].split("_")[0] + "-" + c[0].split("_")[1] for c in CASES],
)
def test_starter_passes_its_quick_workloads_on_cpu(
    definition: str, filters: list[str] | None, repo_root: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv("FIB_DATASET_PATH", raising=False)
    fork = tmp_path / "fork"
    fork.mkdir()
    shutil.copytree(repo_root / "starters", fork / "starters")
    shutil.copy(repo_root / "config.toml", fork / "config.toml")
    switch_track(fork, definition, "triton")
    ws = open_workspace(fork / "config.toml")
    flags = {"device": "cpu", **({"workloads": tuple(filters)} if filters is not None else {})}
    request = make_request(ws.cfg, ws.pack(), RunOptions(quick=True, flags=flags))
    result = execute(request)
    assert result.device == "cpu"
    statuses = {t.workload.uuid[:8]: t.evaluation.status.value for t in result.traces}
    assert statuses and set(statuses.values()) == {"PASSED"}, statuses
