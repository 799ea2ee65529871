"""The worker's sandbox plan (fib_core.bench.containment.mounts): what is read-only, what is opened
again, and the settings that would let a solution write where the next run imports from."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fib_core.bench.containment import mounts as containment
from fib_core.bench.containment.mounts import Mounts, protected_folders, worker_mounts
from fib_core.errors import ConfigError


@pytest.fixture
def fork(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fork at tmp_path/fork, the cache and Triton's cache outside it."""
    root = tmp_path / "fork"
    (root / "fib_core").mkdir(parents=True)
    (root / "scripts").mkdir()
    monkeypatch.setattr(containment, "fork_root", lambda: root.resolve())
    monkeypatch.setattr(containment, "kit_code_folders",
                        lambda: [root / "fib_core", root / "scripts"])
    monkeypatch.setenv("FIB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.delenv("FIB_PROFILE_WORKERS", raising=False)
    return root.resolve()


def test_the_fork_and_the_python_installation_are_read_only(fork: Path) -> None:
    mounts = worker_mounts(None)
    assert str(fork) in mounts.readonly and str(fork / "fib_core") in mounts.readonly
    assert str(Path(sys.prefix).resolve()) in mounts.readonly
    assert mounts.writable == ()  # the cache and Triton's cache lie outside: nothing to open
    assert mounts.hidden and mounts.hidden[0].endswith("keys")


def test_a_cache_inside_the_fork_is_opened_and_its_references_closed_again(
        fork: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIB_CACHE_DIR", str(fork / ".cache"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(fork / ".cache" / "triton-not-made-yet"))
    mounts = worker_mounts(None)
    assert str(fork / ".cache") in mounts.writable
    assert (fork / ".cache" / "triton-not-made-yet").is_dir()  # made, so it can be opened
    order = [path for _, path in mounts.ordered()]
    assert order.index(str(fork)) < order.index(str(fork / ".cache")) \
        < order.index(str(fork / ".cache" / "reference"))
    assert dict((p, k) for k, p in mounts.ordered())[str(fork / ".cache" / "keys")] == "hide"


@pytest.mark.parametrize("setting", ["FIB_CACHE_DIR", "TRITON_CACHE_DIR"])
def test_a_folder_workers_write_that_is_the_fork_is_refused(
        fork: Path, monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv(setting, str(fork))
    with pytest.raises(ConfigError, match="must not write to"):
        worker_mounts(None)


def test_a_link_into_the_fork_is_not_opened(fork: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """An earlier solution may have replaced Triton's cache in the home folder by a link into
    the fork (or its virtualenv's site-packages), to have the next run open it writable."""
    (fork / ".venv").mkdir()
    link = tmp_path / "home-triton-cache"
    link.symlink_to(fork / ".venv")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(link))
    with pytest.raises(ConfigError, match="symbolic link"):
        worker_mounts(None)


def test_a_temporary_folder_holding_the_fork_is_left_alone(fork: Path, tmp_path: Path) -> None:
    """A fork in /tmp (a scratch copy, a CI clone): the fork is protected inside it, the rest
    of the temporary folder stays writable as it is."""
    assert fork.is_relative_to(tmp_path)
    assert not any(Path(w) in fork.parents for w in worker_mounts(None).writable)


def test_folders_on_pythonpath_are_read_only(fork: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    libs = tmp_path / "libs"
    libs.mkdir()
    monkeypatch.setenv("PYTHONPATH", f":relative:{libs}")
    assert libs.resolve() in protected_folders(None)


def test_the_order_puts_outer_folders_first_and_protection_last_at_a_tie() -> None:
    mounts = Mounts(readonly=("/a/b", "/a"), writable=("/a/b", "/a/c"), hidden=("/a/c/k",))
    assert mounts.ordered() == [("ro", "/a"), ("rw", "/a/b"), ("rw", "/a/c"), ("ro", "/a/b"),
                                ("hide", "/a/c/k")]
