"""Which device a run uses, decided without starting the CUDA driver in the launcher."""

from __future__ import annotations

import pytest
import torch

from fib_core.bench.evaluation.environment import resolve_device
from fib_core.errors import ConfigError


@pytest.fixture
def gpus(monkeypatch: pytest.MonkeyPatch):
    """Set how many GPUs torch counts; asking CUDA itself (``is_available``) fails the test."""

    def forbidden() -> bool:
        raise AssertionError("is_available starts the CUDA driver (about 0.5 s per launcher)")

    monkeypatch.setattr(torch.cuda, "is_available", forbidden)
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: True)

    def count(n: int) -> None:
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)

    return count


def test_a_counted_gpu_is_used_and_none_means_the_cpu(gpus) -> None:
    gpus(2)
    assert resolve_device("auto") == "cuda:0"
    assert resolve_device("cuda") == "cuda:0"
    assert resolve_device("cpu") == "cpu"
    gpus(0)
    assert resolve_device("auto") == "cpu"


def test_asking_for_a_gpu_where_there_is_none_is_one_line(gpus) -> None:
    gpus(0)
    with pytest.raises(ConfigError, match="torch sees no CUDA GPU here"):
        resolve_device("cuda")


def test_a_torch_built_without_cuda_runs_on_the_cpu(gpus, monkeypatch) -> None:
    gpus(1)
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: False)
    assert resolve_device("auto") == "cpu"
