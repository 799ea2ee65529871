"""A failing call of a solution names the solution's own line and Python's hint."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import torch

from fib_core.compile import build
from fib_core.compile.solution_errors import NOTE_HEAD, suggestion
from fib_core.compile.source_map import map_solution_paths

from .conftest import solution_from_sources

WRAPPED = '''import math


def _body():
    return math.sqr(2.0)


def run(x, y, alpha, shift, out, neg):
    try:
        _body()
    except AttributeError as err:  # as Triton's interpreter does: the error's repr, re-raised
        raise RuntimeError(repr(err)) from err
'''


def _failure(toy_definition, source: str) -> BaseException:
    sol = solution_from_sources({"main.py": source}, language="python",
                                entry_point="main.py::run")
    x = torch.ones(4)
    with build(sol, toy_definition) as runnable, pytest.raises(Exception) as caught:
        runnable.run([x, x, 1.0, 0.0], [torch.empty(4), torch.empty(4)])
    return caught.value


def test_a_wrapped_error_ends_with_the_solutions_line_and_the_hint(toy_definition) -> None:
    err = _failure(toy_definition, WRAPPED)
    assert isinstance(err, RuntimeError)
    text = map_solution_paths("".join(traceback.format_exception(err)), "solution/python")
    tail = text.rstrip().splitlines()[-4:]
    assert tail == [
        NOTE_HEAD,
        '  File "solution/python/main.py", line 5, in _body',
        "    return math.sqr(2.0)",
        "AttributeError: module 'math' has no attribute 'sqr'. Did you mean: 'sqrt'?",
    ]
    assert len(err.__notes__) == 1  # once, however often it is described


def test_a_plain_error_of_the_solution_gets_only_what_is_missing(toy_definition) -> None:
    err = _failure(toy_definition, "def run(x, y, alpha, shift, out, neg):\n"
                                   "    raise ValueError('planted')\n")
    assert getattr(err, "__notes__", []) == []  # the traceback already says it all
    err = _failure(toy_definition, "def run(x, y, alpha, shift, out, neg):\n"
                                   "    result = x * alpha\n"
                                   "    out.copy_(reslt)\n")
    assert isinstance(err, NameError)
    assert err.__notes__[0].splitlines()[-1] == (
        "NameError: name 'reslt' is not defined. Did you mean: 'result'?")


def test_suggestion_for_a_name_uses_the_frames_names() -> None:
    def f() -> None:
        lenght = 3  # noqa: F841
        print(lengh)  # type: ignore[name-defined]  # noqa: F821

    try:
        f()
    except NameError as err:
        tb = err.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        assert suggestion(err, tb.tb_frame) == ". Did you mean: 'lenght'?"


@pytest.mark.slow
def test_inline_and_the_table_show_a_triton_typo_at_the_kernels_line(tmp_path: Path) -> None:
    """The CPU smoke flow on the shipped starter with `tl.program_idx`: --inline and the run's
    failure list both end with solution/triton/kernel.py's line and "Did you mean"."""
    kit = Path(__file__).resolve().parents[2]
    fork = tmp_path / "fork"
    shutil.copytree(kit / "solution", fork / "solution",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(kit / "config.toml", fork / "config.toml")
    kernel = fork / "solution" / "triton" / "kernel.py"
    text = kernel.read_text()
    assert "tl.program_id(0)" in text
    kernel.write_text(text.replace("tl.program_id(0)", "tl.program_idx(0)", 1))
    line = next(i for i, ln in enumerate(kernel.read_text().splitlines(), 1)
                if "program_idx" in ln)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", COLUMNS="200")
    env.pop("FIB_DATASET_PATH", None)
    hint = "has no attribute 'program_idx'. Did you mean: 'program_id'?"
    where = f'File "solution/triton/kernel.py", line {line}, in '
    for mode in ("--inline", "--no-ledger"):
        proc = subprocess.run(
            [sys.executable, str(kit / "scripts" / "run_local.py"), "--workloads", "acfd1138",
             mode], cwd=fork, capture_output=True, text=True, env=env, timeout=600, check=False)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 1, out[-3000:]
        assert hint in out and where in out, out[-3000:]
        assert "fib-py-" not in out


KERNEL_WITH_TYPO = '''import triton
import triton.language as tl


@triton.jit
def _helper(x):
    return x + tl.program_idx(0)


@triton.jit
def kernel(x_ptr):
    v = tl.load(x_ptr)
    tl.store(x_ptr, _helper(v))
'''


COMPILE_AND_DESCRIBE = """
import importlib.util, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from fib_core.compile.solution_errors import describe

path, keep = sys.argv[1], sys.argv[2] == "keep"
spec = importlib.util.spec_from_file_location("fib_solution_9f_77_1.kernel", path)
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
try:
    triton.compile(ASTSource(module.kernel, signature={"x_ptr": "*fp32"}, constexprs={}),
                   target=GPUTarget("cuda", 90, 32))
except Exception as err:
    print(describe(err if keep else err.with_traceback(None)))
"""


@pytest.mark.parametrize("keep", ["keep", "drop"])
def test_a_triton_compile_error_names_the_helpers_file_line(tmp_path: Path, keep: str) -> None:
    """Triton's real front end (no GPU needed; a process without the interpreter) on a typo
    inside a jitted helper: the note names the build copy's file and the helper's line, with
    Python's hint. Without a traceback (Triton cuts its own frames on the way out; the code
    generator may be gone) the function is found by its source."""
    pytest.importorskip("triton")
    copy = tmp_path / "fib-py-ab12" / "fib_solution_9f_77_1"
    copy.mkdir(parents=True)
    path = copy / "kernel.py"
    path.write_text(KERNEL_WITH_TYPO)
    env = dict(os.environ, TRITON_INTERPRET="0", TRITON_DEFAULT_FP_FUSION="1",
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.run([sys.executable, "-c", COMPILE_AND_DESCRIBE, str(path), keep],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    text = proc.stdout.strip()
    assert f'File "{path}", line 7, in _helper' in text, proc.stdout + proc.stderr
    assert "tl.program_idx(0)" in text
    assert text.endswith("has no attribute 'program_idx'. Did you mean: 'program_id'?")
