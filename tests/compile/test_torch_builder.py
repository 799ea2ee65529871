"""torch-binding builds (torch.utils.cpp_extension): pybind and TORCH_LIBRARY entry points."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fib_core.compile import BuildOptions, build, check_signature
from fib_core.errors import BuildError, SignatureError

from .conftest import incomplete_cuda_toolkit, solution_from_sources

X = torch.tensor([0.0, 1.0, 2.0, 3.0])
Y = torch.tensor([1.0, -1.0, 0.5, 0.0])


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("torch_cache")


@pytest.mark.slow
def test_pybind_value_returning_solution_builds_and_runs(example_solution, toy_definition, module_cache) -> None:
    sol = example_solution("cpp_torch", language="cpp", entry_point="kernel.cpp::run",
                           binding="torch", dps=False)
    options = BuildOptions(cache_dir=module_cache)
    with build(sol, toy_definition, options) as runnable:
        out, neg = runnable.run([X, Y, 2.0, 3])
        torch.testing.assert_close(out, 2.0 * X + 3 + Y)
        torch.testing.assert_close(neg, -(2.0 * X + 3 + Y))
        out, _ = runnable.run([X, None, 2.0, 3])
        torch.testing.assert_close(out, 2.0 * X + 3)
        assert runnable.meta["builder"] == "torch" and runnable.meta["cached"] is False
    again = build(sol, toy_definition, options)
    assert again.meta["cached"] is True
    # pybind shows its parameters, so a DPS/value mismatch is caught before running
    with pytest.raises(SignatureError, match=r"got run\(arg0, arg1, arg2, arg3\); set `destination_passing_style = false`"):
        check_signature(again.fn, toy_definition, dps=True)


@pytest.mark.slow
def test_torch_library_operator_is_the_entry_point(example_solution, toy_definition, module_cache) -> None:
    sol = example_solution("cpp_torch_library", language="cpp", entry_point="ops.cpp::run",
                           binding="torch")
    with build(sol, toy_definition, BuildOptions(cache_dir=module_cache)) as runnable:
        out, neg = torch.full((4,), float("nan")), torch.full((4,), float("nan"))
        runnable.run([X, Y, 2.0, 3], [out, neg])
        torch.testing.assert_close(out, 2.0 * X + 3 + Y)
        torch.testing.assert_close(neg, -out)
        assert runnable.fn is torch.ops.fib_toy.run


def test_sources_without_a_binding_macro_are_rejected_before_compiling(toy_definition, cache_dir) -> None:
    sol = solution_from_sources({"k.cpp": "int run() { return 0; }\n"}, language="cpp",
                                entry_point="k.cpp::run", binding="torch")
    with pytest.raises(BuildError, match=r"PYBIND11_MODULE\(TORCH_EXTENSION_NAME, m\)"):
        build(sol, toy_definition, BuildOptions(cache_dir=cache_dir))


@pytest.mark.skipif(torch.version.cuda is not None, reason="this torch has CUDA")
def test_cuda_sources_with_a_cpu_only_torch_get_a_clear_error(example_solution, toy_definition, cache_dir) -> None:
    sol = example_solution("cuda_torch", language="cuda", entry_point="kernel.cu::run", binding="torch")
    with pytest.raises(BuildError) as info:
        build(sol, toy_definition, BuildOptions(cache_dir=cache_dir, cuda_arch="sm_90a"))
    assert "needs a CUDA build of torch" in str(info.value)
    assert 'binding = "tvm-ffi"' in str(info.value)


@pytest.mark.slow
@pytest.mark.skipif(torch.version.cuda is None, reason="torch binding of .cu sources needs a CUDA torch")
def test_cuda_torch_solution_compiles_for_the_given_arch(example_solution, toy_definition, module_cache) -> None:
    reason = incomplete_cuda_toolkit()
    if reason:
        pytest.skip(reason)
    sol = example_solution("cuda_torch", language="cuda", entry_point="kernel.cu::run", binding="torch")
    runnable = build(sol, toy_definition, BuildOptions(cache_dir=module_cache, cuda_arch="sm_90a"))
    assert runnable.meta["archs"] == ["sm_90a"] and callable(runnable.fn)
