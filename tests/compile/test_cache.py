"""Build cache: one build per key, concurrent builders, lock timeout, unwritable folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fib_core.compile.cache import build_slot, cached_build, file_lock
from fib_core.errors import BuildError

REPO_ROOT = Path(__file__).resolve().parents[2]


def _producer(log: Path):
    def produce(tmp: Path) -> dict:
        with log.open("a") as fh:
            fh.write("built\n")
        (tmp / "artifact.txt").write_text("payload")
        return {"library": "artifact.txt"}

    return produce


def test_second_call_is_a_cache_hit(cache_dir: Path, tmp_path: Path) -> None:
    slot = build_slot(cache_dir, "abc", "key1")
    log = tmp_path / "log.txt"
    manifest, cached = cached_build(slot, _producer(log), timeout_s=5)
    assert (manifest, cached) == ({"library": "artifact.txt"}, False)
    assert (slot / "artifact.txt").read_text() == "payload"
    manifest2, cached2 = cached_build(slot, _producer(log), timeout_s=5)
    assert (manifest2, cached2) == (manifest, True)
    assert log.read_text() == "built\n"
    other = build_slot(cache_dir, "abc", "key2")  # other options: another build
    cached_build(other, _producer(log), timeout_s=5)
    assert log.read_text() == "built\nbuilt\n"


def test_failed_build_leaves_neither_slot_nor_temp_folder(cache_dir: Path) -> None:
    slot = build_slot(cache_dir, "abc", "key")

    def produce(tmp: Path) -> dict:
        (tmp / "half.o").write_text("x")
        raise BuildError("compiler said no")

    with pytest.raises(BuildError, match="compiler said no"):
        cached_build(slot, produce, timeout_s=5)
    assert not slot.exists()
    assert [p.name for p in slot.parent.iterdir()] == ["key.lock"]


_CHILD = """
import json, sys, time
from pathlib import Path
from fib_core.compile.cache import cached_build
slot, log = Path(sys.argv[1]), Path(sys.argv[2])
def produce(tmp):
    with log.open("a") as fh:
        fh.write("built\\n")
    time.sleep(1.0)  # long enough that the other process arrives mid-build
    (tmp / "lib.so").write_text("x")
    return {"library": "lib.so"}
manifest, cached = cached_build(slot, produce, timeout_s=30)
print(json.dumps({"manifest": manifest, "cached": cached}))
"""


def test_two_processes_building_at_once_build_once(cache_dir: Path, tmp_path: Path) -> None:
    slot = build_slot(cache_dir, "same", "key")
    log = tmp_path / "log.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _CHILD, str(slot), str(log)],
                         stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    results = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert log.read_text() == "built\n"
    assert sorted(r["cached"] for r in results) == [False, True]
    assert all(r["manifest"] == {"library": "lib.so"} for r in results)
    assert (slot / "lib.so").read_text() == "x"


def test_lock_held_elsewhere_times_out_with_a_clear_error(cache_dir: Path, tmp_path: Path) -> None:
    slot = build_slot(cache_dir, "held", "key")
    slot.parent.mkdir(parents=True)
    with file_lock(slot.parent / "key.lock", timeout_s=1):
        start = time.monotonic()
        with pytest.raises(BuildError) as info:
            cached_build(slot, _producer(tmp_path / "log"), timeout_s=0.3)
        assert time.monotonic() - start < 5
    assert "lock_timeout_s" in str(info.value) and "key.lock" in str(info.value)
    assert not (tmp_path / "log").exists()


def test_unwritable_cache_folder_fails_fast_naming_folder_and_variable(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the cache folder should be")
    slot = build_slot(blocker / "cache", "abc", "key")
    start = time.monotonic()
    with pytest.raises(BuildError) as info:
        cached_build(slot, _producer(tmp_path / "log"), timeout_s=30)
    assert time.monotonic() - start < 5
    msg = str(info.value)
    assert str(blocker) in msg and "FIB_CACHE_DIR" in msg and "not writable" in msg
    assert "\n" not in msg
