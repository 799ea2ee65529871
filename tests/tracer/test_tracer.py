"""Tracer: what it records, what dedup keeps, blobs that load back, flush at exit/SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from fib_core.apply import apply, get_apply_hook, set_apply_hook
from fib_core.data import SafetensorsInput, ScalarInput, TraceSet
from fib_core.data.json_io import dump_json
from fib_core.tracer import (
    DEDUP_BY_AXES,
    DUMP_INT32,
    KEEP_ALL,
    TraceEntry,
    Tracer,
    TracingRule,
    average_seq_len,
    disable_tracing,
    enable_tracing,
    get_tracer,
    kit_definitions,
    policy_dedup_by_avg_seq_len,
    policy_keep_first_k,
    policy_keep_random_k,
)

ROOT = Path(__file__).resolve().parents[2]
PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
DECODE = "gdn_decode_qk4_v8_d128_k_last"


@pytest.fixture(autouse=True)
def _clean():
    yield
    disable_tracing()
    set_apply_hook(None)


def prefill_args(lengths: list[int]) -> dict:
    total, n = sum(lengths), len(lengths)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int64)
    return {
        "q": torch.zeros(total, 4, 128, dtype=torch.bfloat16),
        "k": torch.zeros(total, 4, 128, dtype=torch.bfloat16),
        "v": torch.zeros(total, 8, 128, dtype=torch.bfloat16),
        "state": torch.zeros(n, 8, 128, 128),
        "A_log": torch.zeros(8),
        "a": torch.zeros(total, 8, dtype=torch.bfloat16),
        "dt_bias": torch.zeros(8),
        "b": torch.zeros(total, 8, dtype=torch.bfloat16),
        "cu_seqlens": cu,
        "scale": 0.125,
    }


def decode_args(batch: int) -> dict:
    return {
        "q": torch.zeros(batch, 1, 4, 128, dtype=torch.bfloat16),
        "k": torch.zeros(batch, 1, 4, 128, dtype=torch.bfloat16),
        "v": torch.zeros(batch, 1, 8, 128, dtype=torch.bfloat16),
        "state": torch.zeros(batch, 8, 128, 128),
        "A_log": torch.zeros(8),
        "a": torch.zeros(batch, 1, 8, dtype=torch.bfloat16),
        "dt_bias": torch.zeros(8),
        "b": torch.zeros(batch, 1, 8, dtype=torch.bfloat16),
        "scale": 0.125,
    }


def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    for name in (PREFILL, DECODE):
        definition = kit_definitions()[name]
        dump_json(definition, root / "definitions" / definition.op_type / f"{name}.json")
    return root


def test_records_axes_scalars_and_dedups_by_axes(tmp_path):
    root = dataset(tmp_path)
    tracer = Tracer(dataset_root=root, out_dir=root / "traces" / "workloads")
    for batch in (1, 4, 1, 4, 4, 16):
        tracer.collect(DECODE, decode_args(batch))
    assert [e.axes for e in tracer.entries] == [{"batch_size": b} for b in (1, 4, 1, 4, 4, 16)]
    stats = tracer.flush()
    assert stats == {DECODE: {"collected": 6, "written": 3, "blobs": 0}}
    assert tracer.entries == []
    ts = TraceSet.from_path(root)
    workloads = ts.workloads[DECODE]
    assert [w.workload.axes["batch_size"] for w in workloads] == [1, 4, 16]
    inputs = workloads[0].workload.inputs
    assert isinstance(inputs["scale"], ScalarInput) and inputs["scale"].value == 0.125
    assert inputs["q"].type == "random"


def test_prefill_rule_dumps_cu_seqlens_as_a_blob_that_loads_back(tmp_path):
    from fib_core.bench.evaluation.inputs import generate_inputs

    root = dataset(tmp_path)
    tracer = Tracer(dataset_root=root)  # out_dir and blob_dir default inside the root
    tracer.collect(PREFILL, prefill_args([3, 5]))
    tracer.collect(PREFILL, prefill_args([4, 4]))  # same axes, same average: dropped
    tracer.collect(PREFILL, prefill_args([1, 1, 1, 5]))
    stats = tracer.flush()
    assert stats[PREFILL] == {"collected": 3, "written": 2, "blobs": 2}
    blobs = sorted((root / "blob" / "workloads" / "gdn" / PREFILL).glob("*.safetensors"))
    assert len(blobs) == 2
    ts = TraceSet.from_path(root)
    first = ts.workloads[PREFILL][0].workload
    spec = first.inputs["cu_seqlens"]
    assert isinstance(spec, SafetensorsInput) and not Path(spec.path).is_absolute()
    assert first.axes == {"total_seq_len": 8, "num_seqs": 2, "len_cu_seqlens": 3}
    definition = ts.definitions[PREFILL]
    args = generate_inputs(definition, first, seed=0, device="cpu", dataset_root=root)
    cu = args[definition.input_names.index("cu_seqlens")]
    assert cu.tolist() == [0, 3, 8]


def test_blob_dir_outside_the_root_is_refused(tmp_path):
    from fib_core.errors import ConfigError

    root = dataset(tmp_path)
    with pytest.raises(ConfigError, match="blob_dir .* is outside the dataset root"):
        Tracer(dataset_root=root, blob_dir=tmp_path / "elsewhere")


def test_without_a_root_blob_paths_follow_the_dataset_layout(tmp_path, monkeypatch):
    """Records and blobs written anywhere, then moved into a dataset's own folders, load."""
    import shutil

    monkeypatch.delenv("FIB_DATASET_PATH", raising=False)
    out = tmp_path / "captured"
    tracer = Tracer(out_dir=out)
    tracer.collect(PREFILL, prefill_args([3, 5]))
    with pytest.warns(UserWarning, match="blob/workloads"):
        assert tracer.flush()[PREFILL]["blobs"] == 1
    root = dataset(tmp_path)
    shutil.copytree(out / "blob", root / "blob" / "workloads", dirs_exist_ok=True)
    shutil.copytree(out / "gdn", root / "traces" / "workloads" / "gdn", dirs_exist_ok=True)
    spec = TraceSet.from_path(root).workloads[PREFILL][0].workload.inputs["cu_seqlens"]
    assert spec.path.startswith("blob/workloads/gdn/") and (root / spec.path).is_file()


def test_no_output_folder_is_a_clear_error(monkeypatch):
    from fib_core.errors import ConfigError

    monkeypatch.delenv("FIB_DATASET_PATH", raising=False)
    with pytest.raises(ConfigError, match="FIB_DATASET_PATH"):
        Tracer()


def test_unknown_definitions_and_missing_inputs_are_skipped(tmp_path):
    tracer = Tracer(out_dir=tmp_path / "out")
    assert tracer.collect("nope", {"x": torch.zeros(1)}) is None
    args = decode_args(2)
    del args["q"]
    assert tracer.collect(DECODE, args) is None
    assert set(tracer.skipped) == {"nope", DECODE}
    assert tracer.flush() == {}


def _entry(order: int, axes: dict, **picked) -> TraceEntry:
    return TraceEntry("d", axes, ["x"], picked, order)


def test_policies():
    entries = [_entry(i, {"n": n}) for i, n in enumerate([1, 1, 2, 3, 3, 3])]
    assert [e.order for e in policy_keep_first_k(2)(entries)] == [0, 1]
    assert [e.order for e in KEEP_ALL(entries[::-1])] == [0, 1, 2, 3, 4, 5]
    assert [e.order for e in DEDUP_BY_AXES(entries)] == [0, 2, 3]
    a = policy_keep_random_k(3, seed=7)(entries)
    assert [e.order for e in a] == [e.order for e in policy_keep_random_k(3, seed=7)(entries)]
    assert len(a) == 3 and a == sorted(a, key=lambda e: e.order)
    with pytest.raises(ValueError, match="k"):
        policy_keep_first_k(0)
    cu = [torch.tensor(v) for v in ([0, 2, 4], [0, 1, 3], [0, 10, 20])]
    by_len = [_entry(i, {"n": 2}, cu_seqlens=c) for i, c in enumerate(cu)]
    assert average_seq_len(by_len[2]) == 10
    assert [e.order for e in policy_dedup_by_avg_seq_len()(by_len)] == [0, 2]


def test_rule_groups_by_dedup_keys_before_the_policy():
    rule = TracingRule(
        tensors_to_dump=DUMP_INT32,
        dedup_policy=policy_keep_first_k(1),
        dedup_keys=lambda e: e.axes["n"] % 2,
    )
    entries = [_entry(i, {"n": n}) for i, n in enumerate([1, 3, 2, 5, 4])]
    assert [e.order for e in rule.select(entries)] == [0, 2]
    bound = {"a": torch.zeros(2, dtype=torch.int32), "b": torch.zeros(2), "c": 3}
    assert rule.names_to_dump(bound) == ["a"]
    with pytest.raises(TypeError):
        TracingRule(tensors_to_dump="a", dedup_policy=KEEP_ALL)


def test_enable_tracing_hooks_apply_and_disable_flushes(tmp_path, monkeypatch):
    root = dataset(tmp_path)
    monkeypatch.setenv("FIB_DATASET_PATH", str(root))

    @apply(DECODE)
    def decode(q, k, v, state, A_log, a, dt_bias, b, scale):
        return None

    tracer = enable_tracing()
    assert get_tracer() is tracer and get_apply_hook().tracer is tracer
    assert tracer.out_dir == root / "traces" / "workloads"
    decode(**decode_args(2))
    decode(*decode_args(3).values())
    replaced = enable_tracing()  # replacing flushes the old tracer
    assert (root / "traces" / "workloads" / "gdn" / f"{DECODE}.jsonl").is_file()
    decode(**decode_args(8))
    assert disable_tracing() == {DECODE: {"collected": 1, "written": 1, "blobs": 0}}
    assert get_tracer() is None and get_apply_hook() is None and replaced.closed
    axes = [w.workload.axes["batch_size"] for w in TraceSet.from_path(root).workloads[DECODE]]
    assert axes == [2, 3, 8]


SCRIPT = """
import sys, time, torch
sys.path.insert(0, {root!r})
from fib_core.apply import apply
from fib_core.tracer import enable_tracing

@apply({name!r})
def decode(q, k, v, state, A_log, a, dt_bias, b, scale):
    return None

enable_tracing(out_dir={out!r})
for batch in (1, 2, 2):
    decode(torch.zeros(batch, 1, 4, 128), torch.zeros(batch, 1, 4, 128),
           torch.zeros(batch, 1, 8, 128), torch.zeros(batch, 8, 128, 128), torch.zeros(8),
           torch.zeros(batch, 1, 8), torch.zeros(8), torch.zeros(batch, 1, 8), 0.1)
print("ready", flush=True)
if {wait}:
    time.sleep(60)
"""


def _run_script(tmp_path: Path, wait: bool) -> tuple[subprocess.Popen, Path]:
    out = tmp_path / "ds" / "traces" / "workloads"
    code = textwrap.dedent(SCRIPT).format(root=str(ROOT), name=DECODE, out=str(out), wait=wait)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    return proc, out / "gdn" / f"{DECODE}.jsonl"


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_flush_at_exit(tmp_path):
    proc, path = _run_script(tmp_path, wait=False)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert _lines(path) == 2  # batch 1 and batch 2 (deduplicated by axes)
    assert "wrote 2 workload(s)" in err


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM semantics")
def test_flush_on_sigterm(tmp_path):
    proc, path = _run_script(tmp_path, wait=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM
    assert _lines(path) == 2


@pytest.mark.gpu
def test_cuda_graph_capture_records_replayed_values(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    root = dataset(tmp_path)
    tracer = Tracer(dataset_root=root)
    args = {
        k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in prefill_args([2, 6]).items()
    }
    static_cu = args["cu_seqlens"]
    out = torch.zeros(1, device="cuda")
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with tracer.cuda_graph_scope():
        with torch.cuda.graph(graph):
            tracer.collect(PREFILL, args)
            out += static_cu.sum()
    assert tracer.entries[0].pending
    static_cu.copy_(torch.tensor([0, 5, 8], device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    assert tracer.snapshot_graph_tensors() == 1
    assert tracer.entries[0].picked["cu_seqlens"].tolist() == [0, 5, 8]
    assert tracer.flush()[PREFILL]["written"] == 1


def test_a_linked_blob_folder_is_inside_its_dataset(tmp_path):
    """As the dataset reader sees it (links not followed): the default setup is accepted."""
    root = dataset(tmp_path)
    elsewhere = tmp_path / "other-disk"
    elsewhere.mkdir()
    (root / "blob").symlink_to(elsewhere, target_is_directory=True)
    tracer = Tracer(dataset_root=root)
    tracer.collect(PREFILL, prefill_args([3, 5]))
    assert tracer.flush()[PREFILL]["blobs"] == 1
    spec = TraceSet.from_path(root).workloads[PREFILL][0].workload.inputs["cu_seqlens"]
    assert spec.path.startswith("blob/workloads/gdn/") and (root / spec.path).is_file()


def test_out_dir_elsewhere_does_not_send_blobs_to_the_environments_dataset(tmp_path, monkeypatch):
    env_root = dataset(tmp_path)
    monkeypatch.setenv("FIB_DATASET_PATH", str(env_root))
    other = tmp_path / "mine" / "traces" / "workloads"
    tracer = Tracer(out_dir=other)  # a dataset of its own: records and blobs both there
    assert tracer.dataset_root == tmp_path / "mine"
    assert tracer.blob_dir == tmp_path / "mine" / "blob" / "workloads"
