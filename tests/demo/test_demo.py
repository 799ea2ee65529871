"""The demo's pieces: the tiny model routes through apply, trace_model.py writes a dataset."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from examples.tiny_gdn.model import DECODE_DEF, PREFILL_DEF, TinyGDN, make_prompts
from fib_core.apply import ApplyConfig, ApplyRuntime, set_apply_hook, set_runtime
from fib_core.data import (
    Correctness,
    Environment,
    Evaluation,
    EvaluationStatus,
    Performance,
    RandomInput,
    Solution,
    Trace,
    TraceSet,
    Workload,
)
from fib_core.tracer import kit_definitions

ROOT = Path(__file__).resolve().parents[2]

# A stand-in "kernel" that marks its output, so the test sees where it ran.
MARKING_DECODE = """
import torch

def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    return torch.zeros(v.shape, dtype=torch.bfloat16, device=v.device), state.clone()
"""


@pytest.fixture(autouse=True)
def _clean(tmp_path, monkeypatch):
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "cache"))
    yield
    set_runtime(None)
    set_apply_hook(None)


def routed_set(batch: int) -> TraceSet:
    ts = TraceSet(root=None)
    ts.add_definition(kit_definitions()[DECODE_DEF])
    ts.add_solution(
        Solution.from_dict(
            {
                "name": "marking",
                "definition": DECODE_DEF,
                "author": "tests",
                "spec": {
                    "language": "python",
                    "target_hardware": ["cpu"],
                    "entry_point": "main.py::run",
                    "destination_passing_style": False,
                },
                "sources": [{"path": "main.py", "content": textwrap.dedent(MARKING_DECODE)}],
            }
        )
    )
    ev = Evaluation(
        status=EvaluationStatus.PASSED,
        log="",
        environment=Environment(hardware="cpu"),
        timestamp="2026-01-01T00:00:00",
        correctness=Correctness(0.0, 0.0),
        performance=Performance(0.01, 0.02, 2.0),
    )
    w = Workload(uuid="w", axes={"batch_size": batch}, inputs={"q": RandomInput()})
    ts.add_traces([Trace(definition=DECODE_DEF, workload=w, solution="marking", evaluation=ev)])
    return ts


def test_model_decode_calls_route_where_recorded_and_prefill_stays_own():
    model = TinyGDN(layers=1)
    seen = []
    set_apply_hook(lambda name, kw: seen.append((name, kw["q"].shape[0])))
    runtime = ApplyRuntime(routed_set(batch=2), ApplyConfig())
    set_runtime(runtime)
    model.generate(make_prompts(2, 3), new_tokens=2)  # recorded batch: routed
    model.generate(make_prompts(1, 3), new_tokens=1)  # batch 1: the model's own code
    assert runtime.stats == {"hits": 2, "misses": 3, "builds": 1}
    assert seen == [(PREFILL_DEF, 5), (DECODE_DEF, 2), (DECODE_DEF, 2), (PREFILL_DEF, 2),
                    (DECODE_DEF, 1)]  # fmt: skip


def test_trace_model_script_writes_a_loadable_dataset(tmp_path):
    dataset = tmp_path / "ds"
    cmd = [sys.executable, str(ROOT / "scripts" / "trace_model.py"), "--dataset", str(dataset),
           "--batches", "1", "3", "--prompt-len", "2", "--new-tokens", "1", "--layers", "1",
           "--device", "cpu"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ts = TraceSet.from_path(dataset)
    decode = sorted(w.workload.axes["batch_size"] for w in ts.workloads[DECODE_DEF])
    assert decode == [1, 3]
    prefill = ts.workloads[PREFILL_DEF]
    assert sorted(w.workload.axes["num_seqs"] for w in prefill) == [1, 3]
    assert all(w.workload.inputs["cu_seqlens"].type == "safetensors" for w in prefill)


def test_trace_model_script_rejects_bad_arguments(tmp_path):
    (tmp_path / "file").write_text("x")
    cmd = [sys.executable, str(ROOT / "scripts" / "trace_model.py"), "--dataset"]
    bad_file = subprocess.run([*cmd, str(tmp_path / "file")], capture_output=True, text=True)
    assert bad_file.returncode == 2 and "is a file" in bad_file.stderr
    assert "Traceback" not in bad_file.stderr
    bad_batch = subprocess.run(
        [*cmd, str(tmp_path / "d"), "--batches", "0"], capture_output=True, text=True
    )
    assert bad_batch.returncode == 2 and "--batches" in bad_batch.stderr


@pytest.mark.gpu
def test_demo_end_to_end_on_gpu(tmp_path):
    """The one-command demo: trace, benchmark, and apply the starter decode kernel on the GPU."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    import tomllib

    definition = tomllib.loads((ROOT / "config.toml").read_text())["solution"]["definition"]
    if definition not in (DECODE_DEF, PREFILL_DEF):
        pytest.skip(f"config.toml holds a {definition} solution; the demo model calls GDN only")
    env = dict(os.environ)
    env.pop("FIB_DATASET_PATH", None)
    cmd = [sys.executable, str(ROOT / "scripts" / "demo_apply.py"), "--out", str(tmp_path / "demo"),
           "--batches", "1", "8", "--new-tokens", "4", "--layers", "2", "--repeat", "1"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "apply table: 2 shape(s) routed" in out
    hits = int(out.split("routed calls: ")[1].split(",")[0])
    assert hits > 0 and "apply on:" in out
