"""The contest's real files load, validate, and round-trip to the same JSON.

Same JSON = the same keys and values of the same JSON types at every level (``1`` stays ``1``,
``1.0`` stays ``1.0``). Key order is the format's (the models' field order): files written in
that order come back as the same text; the DSA record files, written in another order, come
back with the same content.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fib_core.data import Definition, Trace, TraceSet
from fib_core.data.json_io import load_json, load_jsonl


@pytest.fixture(scope="module")
def contest(shared_dir) -> Path:
    return shared_dir / "mlsys26"


def _trace_record_files(contest: Path) -> list[Path]:
    """JSONL files whose lines are Trace records (some files there are plain axis tables)."""
    files = []
    for path in sorted(contest.rglob("*.jsonl")):
        first = json.loads(path.read_text().splitlines()[0])
        if "workload" in first:
            files.append(path)
    return files


def test_every_definition_round_trips_exactly(contest):
    files = sorted((contest / "definitions").rglob("*.json"))
    assert len(files) == 5
    for path in files:
        raw = json.loads(path.read_text())
        out = load_json(path, Definition).to_dict()
        assert out == raw, path.name
        # Same key order at every level: the serialised text is identical.
        assert json.dumps(out) == json.dumps(raw), path.name


def _same_json(a: object, b: object) -> bool:
    """Equal as JSON: keys, values and their JSON types (sorted keys, so order is ignored)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_every_trace_record_round_trips_exactly(contest):
    files = _trace_record_files(contest)
    assert len(files) >= 3  # MoE workloads + the two DSA record files
    in_format_order = 0
    for path in files:
        raws = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        records = load_jsonl(path, Trace)
        assert len(records) == len(raws)
        for record, raw in zip(records, raws, strict=True):
            assert record.is_workload_trace()
            assert _same_json(record.to_dict(), raw), path.name
            # The pydantic forms agree with the kit's.
            assert _same_json(json.loads(record.model_dump_json(exclude_unset=True)), raw)
            assert Trace.model_validate_json(record.model_dump_json()) == record
            if list(raw["workload"]) == ["uuid", "axes", "inputs"]:
                assert json.dumps(record.to_dict()) == json.dumps(raw), path.name
                in_format_order += 1
    assert in_format_order >= 19  # the MoE file, written in the format's order


def test_dataset_loads_as_a_traceset(contest):
    ts = TraceSet.from_path(contest)
    assert len(ts.definitions) == 5
    moe = next(n for n in ts.definitions if n.startswith("moe_"))
    assert len(ts.workloads[moe]) == 19
    for definition in ts.definitions.values():
        # The reference takes the inputs in the definition's order.
        assert definition.reference_signature() == definition.input_names
    gdn = ts.definitions["gdn_prefill_qk4_v8_d128_k_last"]
    assert gdn.check_constraints({"total_seq_len": 10, "num_seqs": 2, "len_cu_seqlens": 3}) == []
    assert gdn.check_constraints({"total_seq_len": 10, "num_seqs": 2, "len_cu_seqlens": 2}) == [
        "len_cu_seqlens == num_seqs + 1"]


def test_real_constraint_over_a_tensor(contest):
    torch = pytest.importorskip("torch")
    gdn = load_json(contest / "definitions" / "gdn" / "gdn_prefill_qk4_v8_d128_k_last.json",
                    Definition)
    axes = {"total_seq_len": 10, "num_seqs": 2, "len_cu_seqlens": 3}
    ok = {"cu_seqlens": torch.tensor([0, 4, 10])}
    short = {"cu_seqlens": torch.tensor([0, 4, 9])}
    assert gdn.check_constraints(axes, ok) == []
    assert gdn.check_constraints(axes, short) == ["total_seq_len == cu_seqlens[-1].item()"]


def test_unpulled_blob_of_a_real_workload(contest):
    ts = TraceSet.from_path(contest)
    moe = next(n for n in ts.definitions if n.startswith("moe_"))
    spec = ts.workloads[moe][0].workload.inputs["routing_logits"]
    with pytest.raises(FileNotFoundError, match="workload blob not found"):
        ts.get_workload_blob_tensor(spec.path)
