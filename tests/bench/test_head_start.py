"""What a worker and a judge start before importing torch: ``nvidia-smi`` (for the GPU this
process sees) and, where allowed, the CUDA context; both then run during the import."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fib_core.bench.evaluation.environment import read_smi, smi_id, start_smi

ROOT = Path(__file__).resolve().parents[2]
ROW = "550.54.15, 1980, 2619, 1980, 2619, 700.00, 31"


def _fake_smi(folder: Path, body: str) -> Path:
    """An executable named nvidia-smi that records its arguments, then runs ``body``."""
    folder.mkdir(exist_ok=True)
    exe = folder / "nvidia-smi"
    exe.write_text(f'#!/bin/sh\necho "$@" > "{folder}/argv"\n{body}\n')
    exe.chmod(0o755)
    return folder


@pytest.fixture
def smi_path(tmp_path, monkeypatch):
    def install(body: str) -> Path:
        folder = _fake_smi(tmp_path / "bin", body)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        return folder
    return install


def test_nvidia_smi_is_asked_about_the_gpu_this_process_sees(smi_path, monkeypatch):
    folder = smi_path(f'echo "{ROW}"')
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # a run's GPU process for physical GPU 3
    fields = read_smi(start_smi(0))
    assert "--id=3" in (folder / "argv").read_text().split()
    assert fields["driver_version"] == "550.54.15"
    assert fields["clocks_max_sm"] == "1980" and fields["temperature_gpu"] == "31"


def test_a_gpu_nvidia_smi_cannot_name_is_not_probed(smi_path, monkeypatch):
    smi_path(f'echo "{ROW}"')
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-4b5c2a1e-0000-0000-0000-000000000000")
    assert start_smi(0) is None
    assert smi_id(0, {"CUDA_VISIBLE_DEVICES": "GPU-8f1e"}) == "GPU-8f1e"
    assert smi_id(1, {"CUDA_VISIBLE_DEVICES": "2"}) is None


def test_a_failing_or_hung_nvidia_smi_reads_as_no_clocks(smi_path):
    smi_path("exit 9")
    assert read_smi(start_smi(0)) == {}
    smi_path("exec sleep 30")
    proc = start_smi(0)
    started = time.monotonic()
    assert read_smi(proc, timeout=0.5) == {}
    assert time.monotonic() - started < 5 and proc.poll() is not None  # killed and reaped
    assert read_smi(None) == {}


def test_the_head_start_begins_before_torch_is_imported(tmp_path):
    """In a fresh interpreter, as a worker starts: nvidia-smi is running (and asked about the
    visible GPU) before anything imports torch, and the environment the driver reads is set."""
    folder = _fake_smi(tmp_path / "bin", f'echo "{ROW}"')
    code = (
        "import os, sys\n"
        "from fib_core.bench.evaluation.head_start import HeadStart\n"
        "from fib_core.bench.evaluation.environment import read_smi\n"
        "ahead = HeadStart.begin('cuda', context=False)\n"
        "assert 'torch' not in sys.modules\n"
        "assert ahead.context is None and ahead.smi is not None\n"
        "assert os.environ['CUDA_MODULE_LOADING'] == 'LAZY'\n"
        "print(read_smi(ahead.smi)['driver_version'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CUDA_MODULE_LOADING"}
    env.update(PATH=f"{folder}{os.pathsep}{os.environ['PATH']}", CUDA_VISIBLE_DEVICES="1",
               PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "550.54.15"
    assert "--id=1" in (folder / "argv").read_text().split()


def test_a_cpu_worker_starts_nothing_ahead(smi_path, monkeypatch, tmp_path):
    from fib_core.bench.evaluation.head_start import HeadStart

    monkeypatch.setenv("CUDA_MODULE_LOADING", "LAZY")  # begin() sets them: restored after
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    folder = smi_path(f'echo "{ROW}"')
    ahead = HeadStart.begin("cpu", context=True)
    assert ahead.context is None and ahead.smi is None
    assert not (folder / "argv").exists()


def _warm_in_fresh_interpreter(task_waiting: bool) -> str:
    code = (
        "import socket, sys\n"
        "from fib_core.bench.evaluation.head_start import warm_triton\n"
        "mine, parent = socket.socketpair()\n"
        f"if {task_waiting}: parent.send(b'x')\n"
        "warm_triton(mine)\n"
        "assert 'triton' in sys.modules  # always: watched alike in every GPU worker\n"
        "from triton.runtime.cache import triton_key\n"
        "print('cached' if triton_key.cache_info().currsize == 1 else 'not cached')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_an_idle_worker_hashes_triton_before_its_first_task():
    """Triton hashes its own files at a process's first kernel launch; a GPU worker that
    waits for its first task does it meanwhile, one whose task is there leaves it to the task."""
    pytest.importorskip("triton.runtime.cache")
    assert _warm_in_fresh_interpreter(task_waiting=False) == "cached"
    assert _warm_in_fresh_interpreter(task_waiting=True) == "not cached"


def test_an_unwanted_nvidia_smi_is_stopped_not_waited_for(smi_path):
    """A worker whose device turned out to be the CPU does not wait for the GPU's tool."""
    from fib_core.bench.evaluation.environment import collect_environment

    smi_path("exec sleep 30")
    proc = start_smi(0)
    started = time.monotonic()
    env = collect_environment("cpu", proc)
    assert env.device_kind == "cpu" and env.clocks == {}
    assert time.monotonic() - started < 10 and proc.poll() is not None  # not the 30 s sleep
