"""Python solutions: multi-file packages, both calling styles, and each failure's message."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from fib_core.compile import BuildOptions, build
from fib_core.errors import BuildError

from .conftest import solution_from_sources

X = torch.tensor([0.0, 1.0, 2.0, 3.0])
Y = torch.tensor([1.0, -1.0, 0.5, 0.0])


def expected(y: torch.Tensor | None) -> torch.Tensor:
    value = 2.0 * X + 3
    return value if y is None else value + y


@pytest.mark.parametrize("y", [Y, None], ids=["with_y", "y_none"])
def test_dps_multi_file_solution_writes_outputs(example_solution, toy_definition, y) -> None:
    sol = example_solution("py_dps", language="python", entry_point="main.py::run")
    with build(sol, toy_definition) as runnable:
        out, neg = torch.full((4,), float("nan")), torch.full((4,), float("nan"))
        result = runnable.run([X, y, 2.0, 3], [out, neg])
        assert result[0] is out and result[1] is neg
        torch.testing.assert_close(out, expected(y))
        torch.testing.assert_close(neg, -expected(y))
        assert runnable.dps and runnable.meta["builder"] == "python"


def test_value_returning_solution_returns_a_tuple(example_solution, toy_definition) -> None:
    sol = example_solution("py_value", language="python", entry_point="main.py::run", dps=False)
    with build(sol, toy_definition) as runnable:
        out, neg = runnable.run([X, Y, 2.0, 3])
        torch.testing.assert_close(out, expected(Y))
        torch.testing.assert_close(neg, -expected(Y))


def test_single_tensor_return_is_normalised_to_a_one_tuple(toy_definition) -> None:
    raw = toy_definition.to_dict()
    raw["outputs"].pop("neg")
    one_output = type(toy_definition).from_dict(raw)
    sol = solution_from_sources({"k.py": "def run(x, y, alpha, shift):\n    return x * alpha\n"},
                                language="python", entry_point="k.py::run", dps=False)
    with build(sol, one_output) as runnable:
        result = runnable.run([X, None, 2.0, 0])
        assert isinstance(result, tuple) and len(result) == 1
        torch.testing.assert_close(result[0], 2.0 * X)


def test_close_unloads_modules_and_deletes_the_build_folder(example_solution, toy_definition) -> None:
    sol = example_solution("py_dps", language="python", entry_point="main.py::run")
    runnable = build(sol, toy_definition)
    package, folder = runnable.meta["package"], Path(runnable.meta["build_dir"])
    assert f"{package}.helpers.util" in sys.modules and folder.is_dir()
    runnable.close()
    assert not any(n.startswith(package) for n in sys.modules)
    assert not folder.exists()
    with pytest.raises(RuntimeError, match="closed"):
        runnable.run([X, None, 2.0, 3], [torch.empty(4), torch.empty(4)])
    runnable.close()  # twice is fine


def test_two_solutions_with_the_same_file_names_do_not_share_modules(toy_definition) -> None:
    def make(factor: float):
        return solution_from_sources(
            {"main.py": "from .util import f\n\ndef run(x, y, alpha, shift):\n    return f(x), -f(x)\n",
             "util.py": f"def f(x):\n    return x * {factor}\n"},
            language="python", entry_point="main.py::run", dps=False)

    with build(make(2.0), toy_definition) as a, build(make(5.0), toy_definition) as b:
        torch.testing.assert_close(a.run([X, None, 1.0, 0])[0], X * 2)
        torch.testing.assert_close(b.run([X, None, 1.0, 0])[0], X * 5)


@pytest.fixture
def build_error(toy_definition):
    """Build python sources that must fail; return the BuildError's message."""

    def run(sources: dict[str, str], entry: str = "main.py::run") -> str:
        sol = solution_from_sources(sources, language="python", entry_point=entry)
        with pytest.raises(BuildError) as info:
            build(sol, toy_definition)
        return str(info.value)

    return run


def test_syntax_error_names_file_and_line_without_traceback(build_error) -> None:
    msg = build_error({"main.py": "def run(x, y, alpha, shift, out, neg):\n    return (\n\nx = 1 +\n"})
    assert "importing the solution failed" in msg.splitlines()[0]
    assert "main.py:" in msg and "SyntaxError" in msg
    assert "Traceback" not in msg and "fib-py-" not in msg


def test_error_raised_at_import_points_at_the_solution_line(build_error) -> None:
    msg = build_error({"main.py": "from .util import g\n\ndef run(*a):\n    pass\n",
                        "util.py": "import math\n\nVALUE = math.nope\n"})
    assert "util.py:3: AttributeError" in msg
    assert "Traceback" not in msg


def test_missing_entry_function_lists_what_the_file_defines(build_error) -> None:
    msg = build_error({"main.py": "def kernel(*a):\n    pass\n\ndef helper():\n    pass\n"})
    assert "defines no function 'run'" in msg and "helper, kernel" in msg


def test_entry_file_must_be_python(build_error) -> None:
    msg = build_error({"main.cu": "// cuda"}, entry="main.cu::run")
    assert "is not a .py file" in msg


def test_definition_mismatch_is_reported(toy_definition) -> None:
    sol = solution_from_sources({"m.py": "def run(*a):\n    pass\n"}, language="python",
                                entry_point="m.py::run", definition="other_def")
    with pytest.raises(BuildError, match="written for definition 'other_def'"):
        build(sol, toy_definition, BuildOptions())
