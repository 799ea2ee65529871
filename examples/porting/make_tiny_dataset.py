"""Write a tiny FlashInfer-Trace dataset (one definition, two workloads, two solutions).

It exists so that ``organizers_script.py`` (code written the flashinfer-bench way) has a dataset
that runs in seconds on a CPU or a GPU:

    python examples/porting/make_tiny_dataset.py /tmp/tiny-dataset
    python examples/porting/organizers_script.py /tmp/tiny-dataset

The definition is ``out = alpha * x + y`` on ``[rows, 64]`` float32 tensors; the solutions are
one destination-passing-style Python function and one value-returning Python function.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from fib_core.data import (  # noqa: E402
    Definition,
    Solution,
    Trace,
    TraceSet,
)

DEFINITION = {
    "name": "tiny_scaled_add",
    "op_type": "tiny",
    "description": "out = alpha * x + y, elementwise (a porting example).",
    "axes": {"rows": {"type": "var"}, "cols": {"type": "const", "value": 64}},
    "inputs": {
        "x": {"shape": ["rows", "cols"], "dtype": "float32"},
        "y": {"shape": ["rows", "cols"], "dtype": "float32"},
        "alpha": {"shape": None, "dtype": "float32"},
    },
    "outputs": {"out": {"shape": ["rows", "cols"], "dtype": "float32"}},
    "reference": "def run(x, y, alpha):\n    return x * alpha + y\n",
}

SOLUTIONS = {
    "tiny_dps": (True, "def run(x, y, alpha, out):\n    out.copy_(x * alpha + y)\n"),
    "tiny_returning": (
        False,
        "import torch\n\n\ndef run(x, y, alpha):\n    return torch.add(y, x, alpha=alpha)\n",
    ),
}


def solution(name: str, dps: bool, source: str) -> Solution:
    return Solution.from_dict(
        {
            "name": name,
            "definition": DEFINITION["name"],
            "author": "example",
            "spec": {
                "language": "python",
                "target_hardware": ["cpu", "cuda"],
                "entry_point": "main.py::run",
                "destination_passing_style": dps,
            },
            "sources": [{"path": "main.py", "content": source}],
        }
    )


def workload(uuid: str, rows: int, alpha: float) -> Trace:
    return Trace.from_dict(
        {
            "definition": DEFINITION["name"],
            "solution": None,
            "workload": {
                "uuid": uuid,
                "axes": {"rows": rows},
                "inputs": {
                    "x": {"type": "random"},
                    "y": {"type": "random"},
                    "alpha": {"type": "scalar", "value": alpha},
                },
            },
            "evaluation": None,
        }
    )


def make(root: Path) -> Path:
    """Write the dataset under ``root`` (which must be new or empty)."""
    if root.exists() and any(root.iterdir()):
        raise SystemExit(f"error: {root} is not empty; pass a new folder")
    ts = TraceSet(root=root)
    ts.add_definition(Definition.from_dict(DEFINITION))
    for name, (dps, source) in SOLUTIONS.items():
        ts.add_solution(solution(name, dps, source))
    ts.add_workload_traces([workload("tiny-rows-8", 8, 0.5), workload("tiny-rows-256", 256, -2.0)])
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="folder to create")
    make(parser.parse_args().root)


if __name__ == "__main__":
    main()
