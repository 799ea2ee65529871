"""Shared fixtures: GPU skipping, the ../shared folder, and an isolated cache per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

SHARED_DIR = REPO_ROOT.parent / "shared"


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # torch missing or broken: no GPU tests
        return False


# Under pytest-xdist every worker (and every process it starts) would size its thread pools to
# the whole machine, so two workers on two cores would run four busy threads. Each worker gets
# its share instead, before anything imports torch; a value set by the user is kept.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    _share = (_cores or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, _share)))

# Without a GPU, Triton kernels run through Triton's interpreter. The variable must be set before
# anything imports triton, hence at conftest import time.
if not _cuda_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _slow_first(items)
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def _slow_first(items: list[pytest.Item]) -> None:
    """Under pytest-xdist, hand out the files that hold ``slow`` tests before the rest.

    The test command runs whole files on one worker (``--dist loadfile``) in the order their
    first test was collected (``--no-loadscope-reorder``); a file of minutes that came last
    would keep one worker busy long after the other ran out of work. Every worker sorts the
    same collection the same way (a stable sort), as xdist requires.
    """
    items.sort(key=lambda item: "slow" not in item.keywords)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The contest's real data beside the repository; tests that need it skip without it."""
    if not (SHARED_DIR / "mlsys26").is_dir():
        pytest.skip("../shared/mlsys26 is not present")
    return SHARED_DIR


@pytest.fixture(autouse=True, scope="session")
def _session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep build and reference caches of the tests out of the user's home folder.

    The embedded dataset is expensive to materialise, so it is shared by the whole session.
    """
    if "FIB_CACHE_DIR" not in os.environ:
        os.environ["FIB_CACHE_DIR"] = str(tmp_path_factory.mktemp("fib_cache"))
