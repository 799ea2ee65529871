"""What a brand-new virtualenv needs is declared in pyproject.toml.

CI once passed on a machine that had numpy installed outside the project while a user's clean
virtualenv failed on the first command (safetensors writes blobs through numpy). This test runs
the kit's import-heavy paths in a subprocess, collects the distributions whose modules got
loaded, and checks each one is a declared dependency or required by one.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Writes and reads a blob, builds the embedded dataset's definitions and imports the engine and
# the Triton builder: the paths of `pip install -e . && python scripts/run_local.py`.
PROBE = """
import sys, tempfile, pathlib
import torch
from fib_core.data.blobs import load_blob, save_blob
from fib_core.bench import Benchmark
from fib_core.compile import build
from fib_core.project.runflow import execute
import fib_core.compile.builders.python
import fib_core.report.render
path = pathlib.Path(tempfile.mkdtemp()) / "b.safetensors"
save_blob(path, {"t": torch.arange(4)})
assert load_blob(path)["t"].tolist() == [0, 1, 2, 3]
try:
    import triton  # the Triton interpreter of the CPU smoke run
except ImportError:
    pass
print("\\n".join(sorted({m.split(".")[0] for m in sys.modules})))
"""


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(spec: str) -> str:
    return _norm(re.split(r"[\s<>=!~;\[(]", spec.strip(), maxsplit=1)[0])


def _closure(names: list[str]) -> set[str]:
    """The declared distributions and everything they require (extras left out)."""
    seen: set[str] = set()
    todo = [_norm(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        todo += [_requirement_name(r) for r in requires if "extra ==" not in r]
    return seen


def test_missing_dependency_declarations():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = _closure([_requirement_name(d) for d in project["dependencies"]])
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    owners = md.packages_distributions()
    undeclared = []
    for module in done.stdout.split():
        if module in sys.stdlib_module_names or module in ("fib_core", "__main__"):
            continue
        # A namespace package ("nvidia") belongs to several distributions: one declared is enough.
        dists = {_norm(d) for d in owners.get(module, [])} - {"fib-core"}
        if dists and not dists & declared:
            undeclared.append(f"{module} ({', '.join(sorted(dists))})")
    assert undeclared == [], f"imported but not declared in pyproject.toml: {undeclared}"


def test_torch_and_triton_have_tested_upper_bounds():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    bounds = {_requirement_name(d): d for d in deps}
    readme = (REPO / "README.md").read_text()
    for name in ("torch", "triton"):
        upper = re.search(r"<\s*([0-9.]+)", bounds[name])
        assert upper, f"{name} has no upper bound in pyproject.toml"
        assert f"{name} `{bounds[name][len(name) :]}`" in readme, (
            f"README must state {bounds[name]}"
        )
    assert "--index-url https://download.pytorch.org/whl/cpu" in readme
