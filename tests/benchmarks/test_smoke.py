"""Every benchmark script runs in its quick mode, so none of them rots unnoticed.

On a CPU a script that can measure something here (build times, TraceSet loading, the engine's
CPU path, the references' wall clock) must exit 0; a GPU-only one must still parse its
arguments and build its inputs, then exit with ``bench_common.NEEDS_GPU`` and say why. With a
GPU every quick run must exit 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"
sys.path.insert(0, str(BENCH))

from bench_common import NEEDS_GPU  # noqa: E402

pytestmark = pytest.mark.slow

# script -> (extra arguments, runs on a CPU, what a CPU run must print)
SCRIPTS: dict[str, tuple[list[str], bool, str]] = {
    "bench_apply.py": ([], True, "routed"),
    "bench_isolation_overhead.py": ([], True, "overhead:"),
    "bench_turnaround.py": ([], True, "gdn_decode"),
    "bench_build.py": ([], True, "per call, Runnable(*args)"),
    "bench_traceset_load.py": ([], True, "TraceSet.from_path over 1 runs"),
    "bench_timing.py": ([], True, "PASSED"),
    "bench_references.py": (["--out", "{tmp}"], True, "1 timed"),
    "bench_reference_cache.py": ([], True, "prefetched"),
    "bench_reference_timing.py": ([], False, "needs a CUDA GPU"),
    "bench_dsa.py": ([], False, "needs a CUDA GPU"),
    "bench_fidelity.py": (["--defs", "gdn_decode_qk4_v8_d128_k_last", "-n", "1"], False,
                          "trace sets written"),
    "bench_gdn.py": ([], False, "needs a CUDA GPU"),
    "bench_moe.py": ([], False, "needs a CUDA GPU"),
    "stress_dsa_indexer.py": ([], False, "needs a CUDA GPU"),
    "tune_gdn_prefill.py": ([], False, "needs a CUDA GPU"),
    "modal_body_check.py": ([], False, "nothing compared"),
}
HELPERS = {"bench_common.py"}


def _script_env() -> dict[str, str]:
    """The environment every script runs in here: the kit importable, output unbuffered, no
    $OUT (scripts then write no files) and no dataset path (the embedded one is used)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1", OUT="")
    env.pop("FIB_DATASET_PATH", None)
    return env


def _gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def test_every_script_has_a_smoke_run() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")} - HELPERS
    assert scripts == set(SCRIPTS), "add new benchmark scripts to SCRIPTS with their quick mode"


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_quick_mode(script: str, tmp_path: Path) -> None:
    extra, on_cpu, says = SCRIPTS[script]
    args = [a.format(tmp=tmp_path) for a in extra]
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_script_env(),
        timeout=600,
    )
    output = proc.stdout + proc.stderr
    expected = 0 if (on_cpu or _gpu()) and script != "modal_body_check.py" else NEEDS_GPU
    assert proc.returncode == expected, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    if not _gpu():
        assert says in output, output[-3000:]
    assert list(tmp_path.iterdir()) == [] or script == "bench_references.py"  # writes only --out


def test_modal_body_check_refuses_to_compare_nothing(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, str(BENCH / "modal_body_check.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2 and "--local-json is required" in proc.stderr


def _bench_moe(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH / "bench_moe.py"), *args],
                          capture_output=True, text=True, cwd=cwd, env=_script_env(), timeout=300)


def test_bench_moe_times_the_starter_copy_it_is_given(tmp_path: Path) -> None:
    """--starter imports that folder's kernel (an older commit's copy, say), not the kit's."""
    starter = REPO / "starters" / "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"
    copy = tmp_path / "old"
    copy.mkdir()
    for src in (starter / "triton").glob("*.py"):
        (copy / src.name).write_text(src.read_text())
    kernel = copy / "kernel.py"
    kernel.write_text(kernel.read_text() + "\nprint('kernel imported from the copy')\n")
    proc = _bench_moe(["--starter", str(copy), "--no-reference", "--quick"], tmp_path)
    output = proc.stdout + proc.stderr
    assert "kernel imported from the copy" in output, output[-3000:]
    assert proc.returncode == (0 if _gpu() else NEEDS_GPU), output[-3000:]


def test_bench_moe_names_a_starter_folder_without_a_kernel(tmp_path: Path) -> None:
    proc = _bench_moe(["--starter", str(tmp_path), "--quick"], tmp_path)
    assert proc.returncode == 2
    assert f"--starter {tmp_path}: no kernel.py there" in proc.stderr
    assert "Traceback" not in proc.stderr


def _tune_gdn(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH / "tune_gdn_prefill.py"), *args],
                          capture_output=True, text=True, cwd=cwd, env=_script_env(), timeout=300)


def test_tune_gdn_prefill_starter_copy_needs_a_kernel_and_workloads(tmp_path: Path) -> None:
    proc = _tune_gdn(["--workloads", "--starter", str(tmp_path)], tmp_path)
    assert proc.returncode == 2
    assert f"--starter {tmp_path}: no kernel.py there" in proc.stderr
    (tmp_path / "kernel.py").write_text("")
    proc = _tune_gdn(["--starter", str(tmp_path)], tmp_path)
    assert proc.returncode == 2 and "--starter goes with --workloads" in proc.stderr
    proc = _tune_gdn(["--workloads", "--shapes", "139:3"], tmp_path)
    assert proc.returncode == 2 and "--shapes goes with the sweep" in proc.stderr
    proc = _tune_gdn(["--workloads", "--quick"], tmp_path)
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(_gpu(), reason="the CPU answer of a GPU-only mode")
def test_tune_gdn_prefill_workloads_on_a_cpu_says_it_needs_a_gpu(tmp_path: Path) -> None:
    proc = _tune_gdn(["--workloads", "--starter", str(BENCH.parent / "starters" /
                                                      "gdn_prefill_qk4_v8_d128_k_last" / "triton")],
                     tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == NEEDS_GPU and "needs a CUDA GPU" in output, output[-2000:]
    assert "Traceback" not in output and list(tmp_path.iterdir()) == []


def test_tune_gdn_prefill_workloads_use_the_datasets_own_sequence_lengths() -> None:
    import tune_gdn_prefill as tune

    from fib_core.dataset import embedded

    records = embedded.workload_records(tune.H.PREFILL)
    record = next(r for r in records if r["workload"]["axes"]["num_seqs"] == 3)
    axes = record["workload"]["axes"]
    want = embedded.blob_tensors(tune.H.PREFILL, axes, record["workload"]["uuid"])["cu_seqlens"]
    inputs = tune.workload_inputs(record, device="cpu")
    cu = inputs[8]
    assert cu.tolist() == want.tolist() and cu[-1] == axes["total_seq_len"]
    assert inputs[0].shape[0] == axes["total_seq_len"] and len(cu) == axes["num_seqs"] + 1


def test_tune_gdn_prefill_workload_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """--workloads times every contest workload once per starter and groups the means by total
    tokens; the GPU timer is replaced here by a latency derived from the call's shape."""
    import tune_gdn_prefill as tune

    from fib_core.dataset import embedded

    # a copy in folders named as the kit's loads beside the kit's starter, not instead of it
    starter = REPO / "starters" / "gdn_prefill_qk4_v8_d128_k_last" / "triton"
    copy = tmp_path / "gdn_prefill_qk4_v8_d128_k_last" / "triton"
    copy.mkdir(parents=True)
    for src in starter.glob("*.py"):
        (copy / src.name).write_text(src.read_text())
    (copy / "kernel.py").write_text((copy / "kernel.py").read_text() + "\nFROM_COPY = True\n")
    try:
        loaded = tune.workload_starters(copy)
        assert list(loaded) == ["current", "--starter"]
        assert loaded["--starter"].FROM_COPY and not hasattr(loaded["current"], "FROM_COPY")
        with pytest.raises(ValueError, match="already loaded from"):
            tune.H.load_triton_starter(starter, tune.COPY_PACKAGE)  # the cache would mislead
    finally:
        for key in [k for k in sys.modules if k.startswith(tune.COPY_PACKAGE)]:
            del sys.modules[key]

    monkeypatch.setattr(tune, "workload_inputs", lambda record: (
        record["workload"]["axes"]["total_seq_len"], record["workload"]["axes"]["num_seqs"]))
    monkeypatch.setattr(tune.bench_gdn, "dps", lambda run, inputs, prefill: (
        (lambda: run(*inputs)), None))
    monkeypatch.setattr(tune.bench_gdn, "kit_us", lambda call: call())
    order: list[str] = []

    class Fake:
        def __init__(self, name: str, scale: float, breaks_at: int | None = None) -> None:
            def run(total: int, n: int) -> float:
                order.append(name)
                if breaks_at is not None and total >= breaks_at:
                    raise RuntimeError("out of resources")
                return scale * total + n

            self.run = run

    lines: list[str] = []
    tune.time_workloads({"current": Fake("a", 1.0), "--starter": Fake("b", 2.0)}, lines)
    axes = [r["workload"]["axes"] for r in embedded.workload_records(tune.H.PREFILL)]
    rows = [line for line in lines[1:] if line.split()[0].isdigit()]
    assert len(rows) == len(axes) == 100
    assert order[:4] == ["a", "b", "b", "a"]  # the starters take turns going first

    def means(group: list[dict]) -> list[str]:
        return [f"n={len(group)}"] + [
            f"{sum(scale * a['total_seq_len'] + a['num_seqs'] for a in group) / len(group):.1f}"
            for scale in (1.0, 2.0)]

    table = [line.split() for line in lines]
    groups = [([*label.split()], [a for a in axes if first <= a["total_seq_len"] <= last])
              for label, first, last in tune.GROUPS]
    assert [len(g) for _, g in groups] == [28, 34, 22, 16]  # the dataset's calls by size
    for label, group in groups:
        assert [*label, *means(group)] in table
    assert table[-1] == ["all", *means(axes)]

    # a starter that raises is named with its error and timed no further; the other goes on
    lines = []
    tune.time_workloads({"current": Fake("a", 1.0), "--starter": Fake("b", 2.0, 8192)}, lines)
    broken = [line for line in lines if line.startswith("--starter failed at T=8192")]
    assert len(broken) == 1 and "RuntimeError: out of resources" in broken[0]
    assert lines[-1].split() == ["all", *means(axes)[:2]]
