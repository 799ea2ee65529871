"""Find the native tools a CUDA/C++ build needs, or say exactly how to get them.

Both build back ends (apache-tvm-ffi and torch's cpp_extension) guess ``CUDA_HOME`` as the
parent of the ``nvcc`` on PATH. That guess is wrong whenever ``nvcc`` is a wrapper script (e.g.
``/usr/local/bin/nvcc`` that execs the real one): the headers are not under ``/usr/local``.
We check candidates for the real layout (``bin/nvcc`` *and* ``include/cuda_runtime.h``) and
export the winner as ``CUDA_HOME`` before either back end looks.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
from pathlib import Path

from fib_core.errors import BuildError

_INSTALL_HINT = (
    "install the CUDA toolkit (it provides nvcc) and set CUDA_HOME to its folder, "
    "e.g. export CUDA_HOME=/usr/local/cuda"
)


# Variables this process's kit code exported (CUDA_HOME for the back ends), with their values.
_SET_HERE: dict[str, str] = {}


def variables_set_here() -> dict[str, str]:
    """Environment variables the kit itself set in this process, and their values: a worker's
    check of what a solution changed takes these as the kit's (a CUDA build exports CUDA_HOME),
    and a solution that sets them to anything else is still seen."""
    return dict(_SET_HERE)


def is_cuda_home(path: Path) -> bool:
    """A CUDA toolkit folder: bin/nvcc and include/cuda_runtime.h."""
    return (path / "bin" / "nvcc").is_file() and (path / "include" / "cuda_runtime.h").is_file()


def _candidates() -> list[Path]:
    out: list[Path] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            out.append(Path(os.environ[var]))
    nvcc = shutil.which("nvcc")
    if nvcc:
        out.append(Path(nvcc).parent.parent)
        out.append(Path(os.path.realpath(nvcc)).parent.parent)
    out.append(Path("/usr/local/cuda"))
    out.extend(Path(p) for p in sorted(glob.glob("/usr/local/cuda-*"), reverse=True))
    out.append(Path("/opt/cuda"))
    return out


def find_cuda_home() -> Path:
    """The CUDA toolkit folder; sets ``CUDA_HOME`` for the build back ends when it was unset.

    An explicit ``CUDA_HOME`` that is not a toolkit is an error rather than silently skipped:
    the contestant set it on purpose and should learn it points nowhere useful.
    """
    explicit = os.environ.get("CUDA_HOME")
    if explicit and not is_cuda_home(Path(explicit)):
        raise BuildError(
            f"CUDA_HOME={explicit} has no bin/nvcc and include/cuda_runtime.h; point it at the "
            "CUDA toolkit folder (the one holding bin/nvcc) or unset it"
        )
    for cand in _candidates():
        if is_cuda_home(cand):
            if "CUDA_HOME" not in os.environ:
                os.environ["CUDA_HOME"] = _SET_HERE["CUDA_HOME"] = str(cand)
            return cand
    raise BuildError(f"nvcc not found (looked at CUDA_HOME, PATH, /usr/local/cuda*): {_INSTALL_HINT}")


@functools.lru_cache(maxsize=8)
def nvcc_version(cuda_home: Path) -> str:
    """``"13.0"``-style release of the toolkit's nvcc ("" when it cannot be read)."""
    try:
        out = subprocess.run(
            [str(cuda_home / "bin" / "nvcc"), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else ""


def ensure_ninja() -> str:
    """Path of ``ninja``; puts the pip ``ninja`` package's binary on PATH when that is the one."""
    found = shutil.which("ninja")
    if found:
        return found
    try:
        import ninja  # type: ignore[import-not-found]

        bin_dir = getattr(ninja, "BIN_DIR", None)
    except ImportError:
        bin_dir = None
    if bin_dir and (Path(bin_dir) / "ninja").is_file():
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        return str(Path(bin_dir) / "ninja")
    raise BuildError(
        "ninja not found: CUDA/C++ solutions are built with ninja; run "
        "`pip install ninja` (or `pip install -e .[cuda]`)"
    )


def ensure_host_compiler() -> str:
    cxx = os.environ.get("CXX") or "c++"
    found = shutil.which(cxx)
    if not found:
        raise BuildError(
            f"C++ compiler {cxx!r} not found: install g++ (e.g. apt-get install g++) or set CXX"
        )
    return found
