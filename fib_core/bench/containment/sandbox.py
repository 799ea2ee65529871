"""Containment of a worker process: parent-death signal, read-only data, no stray processes.

A solution runs with the user's rights, so the worker narrows what it can reach before any
solution code loads (Linux only; every step degrades to a warning, never a failure):

* ``PR_SET_PDEATHSIG``: the worker dies with the engine, even on ``kill -9`` of the engine.
* a user + mount + PID namespace (unprivileged, when the kernel allows it): the fork, the
  dataset and the reference cache are bind-mounted read-only (with the folders a worker writes
  opened again inside them; :mod:`fib_core.bench.containment.mounts` says which), the cache's signing
  key is hidden under an empty tmpfs, and the worker's server is PID 1 of its own PID
  namespace, so every process a solution starts (double-forked, ``setsid`` or not) is killed by
  the kernel when the worker ends.
* where namespaces are refused: the worker becomes a child subreaper and every process started
  under it carries a run token in its environment; the engine kills whatever still carries the
  token when it retires the worker (:func:`kill_tagged`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
TOKEN_VAR = "FIB_WORKER_TOKEN"
DISABLE_VAR = "FIB_SANDBOX"  # "0" turns the namespace step off (the warning then says so)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _prctl(option: int, arg: int) -> bool:
    libc = _libc()
    return bool(libc is not None and libc.prctl(option, arg, 0, 0, 0) == 0)


def die_with_parent(parent: int | None = None, signum: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``signum`` (SIGKILL) to this process when its parent ends
    (Linux). ``parent``: the pid its parent had when it started this process; a process that
    could have lost its parent before this call (a slow start) passes it, so that loss is
    seen too. A kit process with cleanup to do asks for SIGTERM and handles it."""
    parent = os.getppid() if parent is None else parent
    ok = _prctl(PR_SET_PDEATHSIG, signum)
    if ok and os.getppid() != parent:  # the parent died before the call: go now
        os._exit(1)
    return ok


def forbid_tracing() -> bool:
    """Make this process non-dumpable: same-user processes can no longer ptrace it or read
    its memory through /proc (used by the judge, which holds the reference outputs)."""
    return _prctl(PR_SET_DUMPABLE, 0)


def contain(mounts: Sequence[tuple[str, str]]) -> list[str]:
    """Enter the namespaces described above; returns warnings (empty when fully contained).
    ``mounts``: (kind, folder) steps in order (:meth:`fib_core.bench.containment.mounts.Mounts.ordered`):
    ``ro`` binds the folder read-only, ``rw`` opens a folder inside a read-only one again,
    ``hide`` covers it with an empty tmpfs. A folder that does not exist is skipped.

    Must run before any thread starts (before torch is imported). In the PID-namespace case
    this forks: the calling process stays behind as a supervisor that only waits and relays
    the exit status, and the function returns in the child (PID 1 of the namespace).
    """
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if os.environ.get(DISABLE_VAR, "1") == "0":
        return [f"{DISABLE_VAR}=0: the dataset and reference cache are writable by solutions"]
    libc = _libc()
    if libc is None:
        return [
            "no Linux namespaces here: the dataset and reference cache are writable by "
            "solutions, and processes they start are only killed on a clean exit"
        ]
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) != 0:
        err = os.strerror(ctypes.get_errno())
        return [
            f"unprivileged namespaces are refused here ({err}): the dataset and reference "
            "cache are writable by solutions; processes they start are killed when the "
            "worker is retired, but may outlive a kill -9 of the engine"
        ]
    warnings: list[str] = []
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
        _apply_mounts(libc, mounts)
    except OSError as err:
        warnings.append(
            f"could not make the dataset read-only ({err}); it is writable by solutions"
        )
    if not warnings:
        _become_pid_one(libc, uid, gid, warnings)
    else:
        _fork_and_wait(reap_all=False)
    return warnings


def _apply_mounts(libc: ctypes.CDLL, mounts: Sequence[tuple[str, str]]) -> None:
    """Carry out :func:`contain`'s mount steps in order, inside the new mount namespace;
    OSError when one cannot be made (the caller then reports the dataset as writable)."""
    # Only real folders, named without a link anywhere on their path: a link a solution
    # left in a folder it may write (the home folder) must not aim a step elsewhere.
    steps = [(kind, path) for kind, path in mounts
             if os.path.isdir(path) and os.path.realpath(path) == path]
    skipped = [path for kind, path in mounts
               if kind != "rw" and os.path.isdir(path) and os.path.realpath(path) != path]
    if skipped:
        raise OSError(f"{skipped[0]} is reached through a symbolic link")
    _pin_ancestors(libc, [path for _, path in steps])
    for kind, path in steps:
        if kind == "hide":
            _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, b"size=16k,mode=700")
        else:
            _bind(libc, path, readonly=kind == "ro")
    # The current folder was entered before the mounts: it still leads to the writable
    # folder beneath them (a relative path, /proc/self/cwd). Enter it again, through them.
    here = os.getcwd()
    os.chdir("/")
    os.chdir(here)


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _mount(
    libc: ctypes.CDLL,
    source: str | None,
    target: str,
    fstype: str | None,
    flags: int,
    data: bytes | None = None,
) -> None:
    if libc.mount(_enc(source), _enc(target), _enc(fstype), ctypes.c_ulong(flags), data) != 0:
        raise OSError(ctypes.get_errno(), f"mount {target}: {os.strerror(ctypes.get_errno())}")


def _enc(text: str | None) -> bytes | None:
    return text.encode() if text is not None else None


def _pin_ancestors(libc: ctypes.CDLL, paths: Sequence[str]) -> None:
    """Bind every folder above ``paths`` (up to the root) onto itself: a mount point cannot be
    renamed or moved, so a solution cannot move the folder holding a protected one away and
    put a copy of its own making in its place (a cache with a signing key it chose, a fork
    with a planted module) for the next run to use."""
    above = {str(parent) for path in paths for parent in Path(path).parents
             if str(parent) != "/"}
    for folder in sorted(above, key=lambda p: len(Path(p).parts)):
        _mount(libc, folder, folder, None, MS_BIND | MS_REC)


def _bind(libc: ctypes.CDLL, path: str, readonly: bool) -> None:
    """Bind ``path`` onto itself, then remount it read-only (or writable: a folder inside a
    read-only one, opened again) keeping the flags the kernel locks."""
    _mount(libc, path, path, None, MS_BIND | MS_REC)
    have = os.statvfs(path).f_flag
    locked = 0
    for st_flag, ms_flag in (
        (os.ST_NOSUID, MS_NOSUID),
        (os.ST_NODEV, MS_NODEV),
        (os.ST_NOEXEC, MS_NOEXEC),
        (os.ST_NOATIME, MS_NOATIME),
        (os.ST_NODIRATIME, MS_NODIRATIME),
        (os.ST_RELATIME, MS_RELATIME),
    ):
        if have & st_flag:
            locked |= ms_flag
    _mount(libc, None, path, None, MS_REMOUNT | MS_BIND | (MS_RDONLY if readonly else 0) | locked)


def _become_pid_one(libc: ctypes.CDLL, uid: int, gid: int, warnings: list[str]) -> None:
    """Fork into the new PID namespace: the first child is its init (PID 1: it only reaps and
    exits with the server), the grandchild returns and serves. Signals a solution sends to its
    own process therefore behave as usual (PID 1 would ignore them).

    The init mounts a /proc of the new PID namespace (else ``/proc/<pid>/root`` of any
    process outside would lead back to the writable dataset) and enters one more user + mount
    namespace, so that every mount made here is locked: the solution, though root of its own
    namespace, can neither unmount nor remount them writable.
    """
    _fork_and_wait(reap_all=False)
    try:
        _mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError as err:
        warnings.append(
            f"could not mount a private /proc ({err}): processes outside the "
            "worker stay visible and the dataset reachable through them"
        )
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0:
        try:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as err:
            warnings.append(f"could not lock the read-only mounts ({err})")
    else:
        warnings.append("could not lock the read-only mounts: a solution could unmount them")
    _fork_and_wait(reap_all=True)


def _fork_and_wait(reap_all: bool) -> None:
    """Fork; the child returns (dying with its parent), the parent waits and exits with it."""
    child = os.fork()
    if child == 0:
        die_with_parent()
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the engine decides; SIGTERM/SIGKILL end us
    os.closerange(3, 1 << 16)
    while True:
        try:
            pid, status = os.waitpid(-1 if reap_all else child, 0)
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if pid == child:
            if os.WIFSIGNALED(status):  # pass the signal on, so the engine can name it
                sig = os.WTERMSIG(status)
                if sig not in (signal.SIGKILL, signal.SIGSTOP):
                    signal.signal(sig, signal.SIG_DFL)
                os.kill(os.getpid(), sig)
                os._exit(128 + sig)
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def namespaces_available() -> bool:
    """Whether this machine lets an unprivileged process enter the namespaces :func:`contain`
    uses (probed in a throw-away child)."""
    libc = _libc()
    if libc is None or os.environ.get(DISABLE_VAR, "1") == "0":
        return False
    child = os.fork()
    if child == 0:
        ok = libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) == 0
        os._exit(0 if ok else 1)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status) == 0


def kill_tagged(token: str, spare: Sequence[int] = ()) -> int:
    """SIGKILL every process of this user whose environment carries ``token``; the count."""
    needle = f"{TOKEN_VAR}={token}".encode()
    killed = 0
    me = os.getpid()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return 0
    for pid in pids:
        if pid == me or pid in spare:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed
