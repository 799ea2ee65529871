"""The worker's sandbox on its own: read-only data that stays read-only even for a solution that
is root of its namespace, a hidden key folder, a private /proc, signal deaths reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fib_core.bench.containment.sandbox import namespaces_available

ROOT = Path(__file__).resolve().parents[2]

_PROBE = r"""
import ctypes, json, os, sys
from pathlib import Path
from fib_core.bench.containment import sandbox
data, keys = sys.argv[1], sys.argv[2]
opened, inner = os.path.join(data, "cache"), os.path.join(data, "cache", "reference")
warnings = sandbox.contain([("ro", data), ("rw", opened), ("ro", inner), ("hide", keys)])
libc = ctypes.CDLL(None, use_errno=True)
out = {"warnings": warnings, "pid": os.getpid()}
def attempt(name, fn):
    try:
        fn()
        out[name] = "done"
    except OSError as err:
        out[name] = err.strerror
def umount():
    if libc.umount2(data.encode(), 2) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    Path(data, "f").write_text("changed")
def remount():
    if libc.mount(None, data.encode(), None, ctypes.c_ulong(32 | 4096), None) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    Path(data, "f").write_text("changed")
attempt("write", lambda: Path(data, "f").write_text("changed"))
attempt("relative", lambda: Path("rel.py").write_text("planted"))
attempt("proc_cwd", lambda: Path("/proc/self/cwd/cwd.py").write_text("planted"))
attempt("move_parent", lambda: os.rename(os.path.dirname(data), os.path.dirname(data) + "-moved"))
attempt("plant", lambda: Path(data, "json.py").write_text("planted"))
attempt("write_opened", lambda: Path(opened, "build.o").write_text("built"))
attempt("write_inner", lambda: Path(inner, "ref").write_text("forged"))
attempt("umount", umount)
attempt("remount", remount)
out["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
out["keys"] = sorted(os.listdir(keys))
print(json.dumps(out), flush=True)
"""


@pytest.mark.skipif(not namespaces_available(), reason="no unprivileged namespaces here")
def test_read_only_data_cannot_be_unlocked_and_the_key_is_hidden(tmp_path):
    data, keys = tmp_path / "data", tmp_path / "keys"
    data.mkdir()
    keys.mkdir()
    (data / "cache" / "reference").mkdir(parents=True)
    (data / "f").write_text("original")
    (keys / "reference.key").write_bytes(b"k" * 32)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(data), str(keys)],
        env=env,
        cwd=data,  # entered before the mounts, as a worker started from the fork is
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["warnings"] == []
    assert out["write"] == out["plant"] == "Read-only file system"
    assert out["relative"] == out["proc_cwd"] == "Read-only file system"
    # The folder holding a protected one cannot be moved away (and a copy of a solution's
    # making put in its place for the next run): every folder above is a mount point.
    assert out["move_parent"] == "Device or resource busy"
    # A folder inside it opened again (the build cache inside the fork), and one inside that
    # protected again (the reference cache inside the build cache): the innermost step wins.
    assert out["write_opened"] == "done" and out["write_inner"] == "Read-only file system"
    assert (data / "cache" / "build.o").read_text() == "built"
    assert not (data / "json.py").exists()
    assert out["umount"] != "done" and out["remount"] != "done"
    assert out["pid"] == 2 and out["pids"] == [1, 2]  # only its own namespace is visible
    assert out["keys"] == []
    assert (data / "f").read_text() == "original"


def test_a_signal_death_inside_the_sandbox_is_reported_as_one(tmp_path):
    code = (
        "from fib_core.bench.containment import sandbox; import os, signal; sandbox.contain([]); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    rc = subprocess.run([sys.executable, "-c", code], env=env, timeout=60).returncode
    assert rc in (-9, 137)  # killed directly, or relayed by the namespace's init as 128 + 9


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_a_process_whose_parent_ended_before_it_asked_leaves_at_once() -> None:
    """``die_with_parent(pid)`` in a process whose starter (``pid``) is already gone: the
    kernel would never signal it, so it leaves by itself (a worker or a GPU process that lost
    its launcher while it booted)."""
    code = ("import sys, os; from fib_core.bench.containment.sandbox import die_with_parent; "
            "die_with_parent(int(sys.argv[1])); print('still here')")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, timeout=60).stdout.strip()
    gone = subprocess.run([sys.executable, "-c", code, ended], capture_output=True, text=True,
                          timeout=60, env=env)  # its starter: a process that has ended
    assert gone.returncode == 1 and "still here" not in gone.stdout, gone.stderr
    stays = subprocess.run([sys.executable, "-c", code, str(os.getpid())], capture_output=True,
                           text=True, timeout=60, env=env)
    assert stays.returncode == 0 and "still here" in stays.stdout, stays.stderr
