"""Builders of small, valid schema objects for the data-layer tests (plain dicts, as in files)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

DEF_NAME = "toy_scale_t"


def definition_dict(name: str = DEF_NAME, op_type: str = "toy") -> dict[str, Any]:
    return {
        "name": name,
        "description": "y = x * scale, with a page table that must fit",
        "op_type": op_type,
        "tags": ["status:test"],
        "axes": {
            "tokens": {"type": "var", "description": "rows"},
            "pages": {"type": "var"},
            "hidden": {"type": "const", "value": 64},
        },
        "constraints": ["pages >= 1", "table.shape[1] == pages"],
        "inputs": {
            "x": {"shape": ["tokens", "hidden"], "dtype": "bfloat16"},
            "table": {"shape": ["tokens", "pages"], "dtype": "int32", "optional": True},
            "scale": {"shape": None, "dtype": "float32", "description": "multiplier"},
        },
        "outputs": {"y": {"shape": ["tokens", "hidden"], "dtype": "bfloat16"}},
        "reference": "def run(x, table, scale):\n    return x * scale\n",
    }


def workload_dict(uuid: str = "w-1", tokens: int = 4, pages: int = 2) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "axes": {"tokens": tokens, "pages": pages},
        "inputs": {
            "x": {"type": "random"},
            "table": {"type": "safetensors", "path": "./blob/t.safetensors", "tensor_key": "t"},
            "scale": {"type": "scalar", "value": 0.5},
        },
    }


def solution_dict(name: str = "sol-a", author: str = "alice", definition: str = DEF_NAME,
                  **spec: Any) -> dict[str, Any]:
    return {
        "name": name,
        "definition": definition,
        "author": author,
        "spec": {
            "language": "triton",
            "target_hardware": ["B200"],
            "entry_point": "kernel/main.py::run",
            **spec,
        },
        "sources": [
            {"path": "kernel/main.py", "content": "def run(x, table, scale, y):\n    pass\n"},
            {"path": "kernel/util.py", "content": "# helpers\n"},
        ],
    }


def evaluation_dict(status: str = "PASSED", latency: float = 1.0, ref_latency: float = 2.0,
                    rel: Any = 1e-3, abs_: Any = 1e-4) -> dict[str, Any]:
    with_corr = status in ("PASSED", "INCORRECT_NUMERICAL")
    return {
        "status": status,
        "log": "" if status == "PASSED" else "something went wrong",
        "correctness": {"max_relative_error": rel, "max_absolute_error": abs_}
        if with_corr else None,
        "performance": {
            "latency_ms": latency,
            "reference_latency_ms": ref_latency,
            "speedup_factor": ref_latency / latency,
        } if status == "PASSED" else None,
        "environment": {"hardware": "NVIDIA B200", "libs": {"torch": "2.9.0"}},
        "timestamp": "2026-01-15T10:00:00",
    }


def trace_dict(solution: str | None = "sol-a", workload_uuid: str = "w-1",
               definition: str = DEF_NAME, **evaluation: Any) -> dict[str, Any]:
    return {
        "definition": definition,
        "solution": solution,
        "workload": workload_dict(workload_uuid),
        "evaluation": evaluation_dict(**evaluation) if solution is not None else None,
    }


class Builders:
    """Fresh dicts on every call (tests mutate them to make broken variants)."""

    definition = staticmethod(definition_dict)
    workload = staticmethod(workload_dict)
    solution = staticmethod(solution_dict)
    evaluation = staticmethod(evaluation_dict)
    trace = staticmethod(trace_dict)

    @staticmethod
    def deep(d: dict) -> dict:
        return copy.deepcopy(d)


@pytest.fixture
def build() -> type[Builders]:
    return Builders


@pytest.fixture
def def_name() -> str:
    return DEF_NAME

