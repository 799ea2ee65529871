"""What every benchmark script shares: the checkout on sys.path, the exit code of a GPU-only
script run without a GPU.

Scripts run as ``python benchmarks/<name>.py`` find this module beside them. A GPU-only script's
``--quick`` mode still parses its arguments and builds its inputs on a CPU, then exits with
``NEEDS_GPU`` (distinct from 0 = compared something, 1 = a difference found, 2 = bad usage), so a
CPU smoke test can tell "ran as far as it can here" from "broken".
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

# "Ran as far as it can here; measured or compared nothing": a GPU-only script's --quick run on a
# CPU, or a smoke step that stops before the real work.
NEEDS_GPU = 3
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the scripts import fib_core from this checkout
    sys.path.insert(0, str(REPO))


def needs_gpu(script: str, done: str = "") -> int:
    """Print one line saying the script needs a GPU (and what the smoke run did), return the code."""
    extra = f" ({done})" if done else ""
    print(f"{script}: needs a CUDA GPU; nothing timed{extra}", file=sys.stderr)
    return NEEDS_GPU


def starter_fork(definition: str, scratch: Path, name: str, use_reference: bool = False) -> Any:
    """The config of a scratch fork under ``scratch`` holding the definition's default
    starter (Triton where there is one), or its Python reference as the solution."""
    from fib_core.project.config import config_from_dict
    from fib_core.project.switch import available_starters, read_starter

    root = scratch / definition
    if use_reference:
        from fib_core.dataset.references import reference_source

        (root / "solution" / "python").mkdir(parents=True)
        (root / "solution" / "python" / "kernel.py").write_text(reference_source(definition))
        build = {
            "language": "python",
            "entry_point": "kernel.py::run",
            "destination_passing_style": False,
        }
    else:
        languages = available_starters(REPO)[definition]
        language = "triton" if "triton" in languages else languages[0]
        starter = REPO / "starters" / definition / language
        shutil.copytree(starter, root / "solution" / language)
        build = dict(read_starter(starter)["build"])
    data = {
        "solution": {"name": name, "definition": definition, "author": "bench"},
        "build": build,
    }
    return config_from_dict(data, root / "config.toml")
