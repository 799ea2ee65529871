"""CUDA_HOME discovery through wrapper scripts, nvcc versions, torch/nvcc mismatch."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from fib_core.compile import toolchain
from fib_core.compile.builders.native import NativePlan
from fib_core.compile.builders.torch_ext import _check_torch_cuda
from fib_core.errors import BuildError


def fake_toolkit(root: Path, release: str) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("// fake\n")
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    nvcc.chmod(0o755)
    return root


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.setenv(var, "")  # recorded first, so what find_cuda_home sets is undone
        monkeypatch.delenv(var)
    return monkeypatch


def test_nvcc_behind_a_link_resolves_to_the_real_toolkit(tmp_path: Path, clean_env) -> None:
    kit = fake_toolkit(tmp_path / "cuda-13.0", "13.0")
    wrap_bin = tmp_path / "wrap" / "bin"
    wrap_bin.mkdir(parents=True)
    (wrap_bin / "nvcc").symlink_to(kit / "bin" / "nvcc")
    clean_env.setenv("PATH", f"{wrap_bin}{os.pathsep}{os.environ['PATH']}")
    assert toolchain.find_cuda_home() == kit  # not tmp/wrap: it has no include/
    assert os.environ["CUDA_HOME"] == str(kit)
    assert toolchain.nvcc_version(kit) == "13.0"


def test_the_kits_cuda_home_export_is_not_blamed_on_the_solution(tmp_path: Path, clean_env) -> None:
    """A worker's check of what a solution changed takes the kit's export as the kit's."""
    from fib_core.bench.evaluation.tamper_watch import ProcessState

    kit = fake_toolkit(tmp_path / "cuda", "12.8")
    clean_env.setenv("PATH", f"{kit / 'bin'}{os.pathsep}{os.environ['PATH']}")
    state = ProcessState()  # the baseline, taken before the first task's build
    toolchain.find_cuda_home()
    assert toolchain.variables_set_here() == {"CUDA_HOME": str(kit)}
    assert state.restore() == [] and os.environ["CUDA_HOME"] == str(kit)
    os.environ["CUDA_HOME"] = str(tmp_path)  # a solution pointing it elsewhere is still seen
    assert state.restore() == ["environment variables (CUDA_HOME)"]
    assert os.environ["CUDA_HOME"] == str(kit)
    # Solution code shares the process: writing the kit's record adopts nothing else.
    toolchain._SET_HERE["FIB_TEST_SNEAKY"] = os.environ["FIB_TEST_SNEAKY"] = "/tmp/x.so"
    try:
        assert state.restore() == ["environment variables (FIB_TEST_SNEAKY)"]
        assert "FIB_TEST_SNEAKY" not in os.environ
    finally:
        toolchain._SET_HERE.pop("FIB_TEST_SNEAKY", None)


def test_explicit_cuda_home_wins(tmp_path: Path, clean_env) -> None:
    kit = fake_toolkit(tmp_path / "kit", "12.8")
    clean_env.setenv("CUDA_HOME", str(kit))
    assert toolchain.find_cuda_home() == kit


def test_torch_binding_refuses_a_different_nvcc_major(tmp_path: Path) -> None:
    kit = fake_toolkit(tmp_path / "kit", "13.0")
    fake_torch = SimpleNamespace(__version__="2.9.0+cu128", version=SimpleNamespace(cuda="12.8"))
    plan = NativePlan(sources=["k.cu"], has_cuda=True, cuda_home=kit)
    with pytest.raises(BuildError) as info:
        _check_torch_cuda(fake_torch, plan)
    msg = str(info.value)
    assert "CUDA 13.0" in msg and "CUDA 12.8" in msg and 'binding = "tvm-ffi"' in msg
