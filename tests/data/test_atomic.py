"""The kit's one atomic-write helper: old or new content, never half, no temp file left."""

from __future__ import annotations

import os
import stat

import pytest

from fib_core.atomic import atomic_write, atomic_write_bytes, atomic_write_text


def test_text_replaces_and_creates_folders(tmp_path):
    path = tmp_path / "a" / "b" / "out.json"
    atomic_write_text(path, "first\n")
    atomic_write_text(path, "second é\n")
    assert path.read_text(encoding="utf-8") == "second é\n"
    assert os.listdir(path.parent) == ["out.json"]


def test_failed_writer_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "cache.bin"
    atomic_write_bytes(path, b"old")

    def half_then_fail(tmp):
        tmp.write_bytes(b"ne")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        atomic_write(path, half_then_fail)
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["cache.bin"]


def test_modes_new_kept_or_given(tmp_path):
    path = tmp_path / "out.json"
    atomic_write_text(path, "{}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    path.chmod(0o664)
    atomic_write_text(path, "[]")
    assert stat.S_IMODE(path.stat().st_mode) == 0o664  # a replaced file keeps its bits
    key = tmp_path / "key"
    atomic_write_bytes(key, b"secret", mode=0o600)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_a_folder_in_the_files_place_is_named(tmp_path) -> None:
    (tmp_path / "out.json").mkdir()
    with pytest.raises(IsADirectoryError, match=r"Is a directory: '.*/out\.json'$"):
        atomic_write_text(tmp_path / "out.json", "{}")
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temp file left
