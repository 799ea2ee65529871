"""The embedded dataset: layout, loading, determinism, atomic materialisation, real values."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest

from fib_core.dataset import embedded, registry
from fib_core.dataset.embedded import (
    DATA_VERSION,
    default_dataset_path,
    definition_files,
    embedded_dataset_path,
    workload_records,
    write_dataset,
)
from fib_core.dataset.references import reference_source
from fib_core.dataset.workload_table import REAL_WORKLOADS, workload_rows

NAMES = registry.definitions()


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_layout_and_definitions_carry_our_reference(dataset_root):
    assert dataset_root.name.startswith(f"embedded-dataset-v{DATA_VERSION}-")
    for name, committed in definition_files().items():
        op_type = json.loads(committed.read_text())["op_type"]
        written = json.loads((dataset_root / "definitions" / op_type / f"{name}.json").read_text())
        assert written["reference"] == reference_source(name)
        assert "reference" not in json.loads(committed.read_text())
        assert (dataset_root / "workloads" / op_type / f"{name}.jsonl").is_file()


def test_loads_with_traceset_and_every_blob_is_there(dataset_root):
    traceset = pytest.importorskip("fib_core.data.traceset")
    ts = traceset.TraceSet.from_path(dataset_root)
    assert sorted(ts.definitions) == NAMES
    for name in NAMES:
        workloads = ts.workloads[name]
        assert len(workloads) == len(REAL_WORKLOADS[name][1])
        quick = [t for t in workloads if t.workload.extra.get("tags") == ["quick"]]
        assert 2 <= len(quick) <= 3
        for trace in workloads:
            assert trace.solution is None and trace.evaluation is None
            for spec in trace.workload.inputs.values():
                if spec.to_dict()["type"] == "safetensors":
                    assert (dataset_root / spec.path).is_file()


def test_workload_axes_are_the_real_ones_in_order(dataset_root):
    for name in NAMES:
        records = workload_records(name)
        rows = workload_rows(name)
        for record, row in zip(records, rows, strict=True):
            for axis, value in record["workload"]["axes"].items():
                assert row[axis] == value
        assert len({r["workload"]["uuid"] for r in records}) == len(records)


def test_real_scalars_are_used():
    moe = workload_records("moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048")
    offsets = [r["workload"]["inputs"]["local_expert_offset"]["value"] for r in moe]
    assert all(o % 32 == 0 and 0 <= o < 256 for o in offsets) and len(set(offsets)) > 3
    assert {r["workload"]["inputs"]["routed_scaling_factor"]["value"] for r in moe} == {2.5}
    dsa = workload_records("dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64")
    assert {r["workload"]["inputs"]["sm_scale"]["value"] for r in dsa} == {0.1352337788608801}


def test_quick_workloads_are_the_cheapest_shapes():
    from fib_core.dataset.roofline import GPU_PEAKS, roofline_floor_ms, workload_cost

    peak = GPU_PEAKS["H100 SXM"]
    for name in NAMES:
        floors = {
            r["workload"]["uuid"]: roofline_floor_ms(workload_cost(name, r["workload"]["axes"]), peak).ms
            for r in workload_records(name)
        }
        quick = [r["workload"]["uuid"] for r in workload_records(name) if r["workload"].get("tags")]
        slowest_quick = max(floors[u] for u in quick)
        assert sorted(floors.values()).index(slowest_quick) < len(floors) // 2


def test_materialisation_is_deterministic(tmp_path, dataset_root):
    write_dataset(tmp_path / "again")
    assert _tree_digest(tmp_path / "again") == _tree_digest(dataset_root)


def test_concurrent_materialisation_gives_one_complete_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path))
    results: list[Path] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            results.append(embedded_dataset_path())
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1
    assert [p.name for p in tmp_path.iterdir()] == [results[0].name], "staging folders left behind"
    assert sum(1 for _ in results[0].rglob("*.safetensors")) > 200


def test_folder_name_follows_the_content_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(embedded, "content_hash", lambda: "aaaaaaaaaaaa")
    monkeypatch.setattr(embedded, "write_dataset", lambda root: (root / "definitions").mkdir())
    first = embedded_dataset_path()
    monkeypatch.setattr(embedded, "content_hash", lambda: "bbbbbbbbbbbb")
    second = embedded_dataset_path()
    assert first != second and first.name.endswith("aaaaaaaaaaaa") and second.is_dir()


def test_unwritable_cache_is_a_one_line_user_error(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("FIB_CACHE_DIR", str(blocker))
    with pytest.raises(embedded.DatasetCacheError, match="set FIB_CACHE_DIR to a writable folder") as info:
        embedded_dataset_path()
    assert str(blocker) in str(info.value) and "\n" not in str(info.value)


def test_default_dataset_path_prefers_the_environment(tmp_path, monkeypatch, dataset_root):
    monkeypatch.setenv("FIB_DATASET_PATH", str(tmp_path))
    assert default_dataset_path() == tmp_path
    monkeypatch.delenv("FIB_DATASET_PATH")
    assert default_dataset_path() == dataset_root


def test_committed_definitions_match_the_real_ones(shared_dir):
    """Same names, op types, axes, dtypes, shapes, optional flags, tags and constraints."""
    for name, committed in definition_files().items():
        ours = json.loads(committed.read_text())
        real_path = shared_dir / "mlsys26" / "definitions" / ours["op_type"] / f"{name}.json"
        real = json.loads(real_path.read_text())
        for key in ("name", "op_type", "tags", "constraints"):
            assert ours.get(key) == real.get(key), (name, key)
        assert {a: (s["type"], s.get("value")) for a, s in ours["axes"].items()} == {
            a: (s["type"], s.get("value")) for a, s in real["axes"].items()
        }
        for section in ("inputs", "outputs"):
            assert list(ours[section]) == list(real[section]), (name, section)
            for n, spec in ours[section].items():
                r = real[section][n]
                assert (spec["shape"], spec["dtype"], spec.get("optional", False)) == (
                    r["shape"], r["dtype"], r.get("optional", False)), (name, n)


def test_committed_table_holds_every_real_workload(shared_dir):
    base = shared_dir / "mlsys26"
    files = {
        "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64": base / "workload_axes" / "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64.jsonl",
        "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64": base / "workload_axes" / "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64.jsonl",
        "gdn_decode_qk4_v8_d128_k_last": base / "workload_axes" / "gdn_decode_qk4_v8_d128_k_last.axes.jsonl",
        "gdn_prefill_qk4_v8_d128_k_last": base / "workload_axes" / "gdn_prefill_qk4_v8_d128_k_last.axes.jsonl",
        "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048": base / "workloads" / "moe" / "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048.jsonl",
    }
    for name, path in files.items():
        real = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        real = [r.get("workload", r) for r in real]
        ours = workload_rows(name)
        assert len(ours) == len(real), name
        for mine, theirs in zip(ours, real, strict=True):
            assert {k: mine[k] for k in theirs["axes"]} == theirs["axes"]
            if "local_expert_offset" in mine:
                assert mine["local_expert_offset"] == theirs["inputs"]["local_expert_offset"]["value"]


def test_loads_in_flashinfer_bench(dataset_root):
    fib = pytest.importorskip("flashinfer_bench")
    ts = fib.TraceSet.from_path(str(dataset_root))
    assert sorted(ts.definitions) == NAMES
    assert sum(len(v) for v in ts.workloads.values()) == sum(len(r[1]) for r in REAL_WORKLOADS.values())
