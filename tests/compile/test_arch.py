"""cuda_arch spellings, GPU detection and the no-GPU error."""

from __future__ import annotations

import pytest

from fib_core.compile import arch
from fib_core.compile.arch import CudaArch, arch_for_capability, parse_cuda_arch, resolve_cuda_arch
from fib_core.errors import BuildError


@pytest.mark.parametrize(
    ("text", "sm", "dotted", "gencode"),
    [
        ("sm_90a", "sm_90a", "9.0a", "-gencode=arch=compute_90a,code=sm_90a"),
        ("sm_100a", "sm_100a", "10.0a", "-gencode=arch=compute_100a,code=sm_100a"),
        ("90a", "sm_90a", "9.0a", "-gencode=arch=compute_90a,code=sm_90a"),
        ("9.0a", "sm_90a", "9.0a", "-gencode=arch=compute_90a,code=sm_90a"),
        ("10.0a", "sm_100a", "10.0a", "-gencode=arch=compute_100a,code=sm_100a"),
        ("SM_100", "sm_100", "10.0", "-gencode=arch=compute_100,code=sm_100"),
        ("compute_120f", "sm_120f", "12.0f", "-gencode=arch=compute_120f,code=sm_120f"),
        ("8.6", "sm_86", "8.6", "-gencode=arch=compute_86,code=sm_86"),
    ],
)
def test_parse_cuda_arch_forms(text: str, sm: str, dotted: str, gencode: str) -> None:
    (a,) = parse_cuda_arch(text)
    assert (a.sm, a.dotted, a.gencode) == (sm, dotted, gencode)


def test_parse_several_targets_keeps_order_and_drops_repeats() -> None:
    archs = parse_cuda_arch("sm_90a, 10.0a 90a")
    assert [a.sm for a in archs] == ["sm_90a", "sm_100a"]


@pytest.mark.parametrize("bad", ["sm90x", "hopper", "sm_1000a", "", "2.0"])
def test_parse_rejects_unreadable_arch(bad: str) -> None:
    with pytest.raises(BuildError) as info:
        parse_cuda_arch(bad)
    assert "cuda_arch" in str(info.value)
    assert "\n" not in str(info.value)


def test_capability_maps_to_arch_specific_target_from_hopper_on() -> None:
    assert arch_for_capability(9, 0).sm == "sm_90a"
    assert arch_for_capability(10, 0).sm == "sm_100a"
    assert arch_for_capability(8, 9).sm == "sm_89"


def test_resolve_prefers_option_then_env_then_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arch, "detect_cuda_arch", lambda: [CudaArch(9, 0, "a")])
    monkeypatch.setenv(arch.ARCH_ENV, "10.0a")
    assert [a.sm for a in resolve_cuda_arch("sm_120a")] == ["sm_120a"]
    assert [a.sm for a in resolve_cuda_arch(None)] == ["sm_100a"]
    monkeypatch.delenv(arch.ARCH_ENV)
    assert [a.sm for a in resolve_cuda_arch(None)] == ["sm_90a"]


def test_detect_reads_the_gpu_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (10, 0))
    assert [a.sm for a in arch.detect_cuda_arch()] == ["sm_100a"]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    assert [a.sm for a in arch.detect_cuda_arch()] == ["sm_90a"]


def test_no_gpu_and_no_setting_says_where_to_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arch, "detect_cuda_arch", lambda: None)
    monkeypatch.delenv(arch.ARCH_ENV, raising=False)
    with pytest.raises(BuildError) as info:
        resolve_cuda_arch(None)
    msg = str(info.value)
    assert "cuda_arch" in msg and "[build]" in msg and "config.toml" in msg
    assert "FIB_CUDA_ARCH" in msg and "sm_100a" in msg
