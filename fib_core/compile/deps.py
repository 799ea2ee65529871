"""Header-only dependencies named in a solution's ``spec.dependencies`` (CUTLASS today).

The FlashInfer-Trace format lists dependencies by name (``"CUTLASS_3_7"``); the grading
machine provides them. Locally we find the headers or stop with instructions, because a
missing ``cutlass/cutlass.h`` otherwise surfaces as dozens of unrelated compiler errors.
Names we do not know (``"torch"``, ``"triton"``...) need nothing from the build and pass.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from fib_core.errors import BuildError

CUTLASS_ENVS = ("CUTLASS_HOME", "CUTLASS_PATH", "CUTLASS_DIR")


def _cutlass_roots() -> list[Path]:
    roots = [Path(os.environ[v]) for v in CUTLASS_ENVS if os.environ.get(v)]
    home = Path.home()
    roots += [Path("/usr/local/cutlass"), Path("/opt/cutlass"), home / "cutlass",
              Path("/usr/local/include"), Path("/usr/include")]
    for site in sys.path:
        # pip packages that ship the headers: nvidia-cutlass (cutlass_library) and flashinfer.
        roots.append(Path(site) / "cutlass_library" / "source")
        roots.append(Path(site) / "flashinfer" / "data" / "cutlass")
    return roots


def _include_dirs_of(root: Path) -> list[Path]:
    """The include folders of a CUTLASS checkout/install rooted at ``root`` ([] if none)."""
    for inc in (root / "include", root):
        if (inc / "cutlass" / "cutlass.h").is_file():
            dirs = [inc]
            util = root / "tools" / "util" / "include"
            if util.is_dir():
                dirs.append(util)
            return dirs
    return []


def _version_hint(name: str) -> str:
    m = re.search(r"(\d+)[_.](\d+)(?:[_.](\d+))?", name)
    return f"v{m[1]}.{m[2]}.{m[3] or 0}" if m else "main"


def find_cutlass(name: str = "CUTLASS") -> list[Path]:
    """Include folders for the dependency ``name``; BuildError with install steps if absent."""
    env_set = [v for v in CUTLASS_ENVS if os.environ.get(v)]
    for root in _cutlass_roots():
        dirs = _include_dirs_of(root)
        if dirs:
            return dirs
    where = f"{env_set[0]}={os.environ[env_set[0]]} has no include/cutlass/cutlass.h; " if env_set else ""
    raise BuildError(
        f"dependency {name}: CUTLASS headers not found; {where}run `git clone --depth 1 -b "
        f"{_version_hint(name)} https://github.com/NVIDIA/cutlass` and set CUTLASS_HOME to "
        "that folder (or add its include folder to include_dirs under [build] in config.toml)"
    )


def dependency_include_dirs(dependencies: list[str]) -> list[Path]:
    """Include folders for every dependency the build must locate (CUTLASS*)."""
    dirs: list[Path] = []
    for dep in dependencies:
        if dep.strip().upper().startswith("CUTLASS"):
            for d in find_cutlass(dep):
                if d not in dirs:
                    dirs.append(d)
    return dirs
