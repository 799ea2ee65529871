"""tvm-ffi builds on a machine with nvcc and no GPU: C++ modules are compiled AND called with
CPU tensors (this proves the calling convention kernel authors follow); CUDA modules compile
for an explicit arch and their exported symbol is found."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fib_core.compile import BuildOptions, build, deps, toolchain
from fib_core.compile import arch as arch_mod
from fib_core.errors import BuildError, SignatureError

from .conftest import solution_from_sources

pytest.importorskip("tvm_ffi")

X = torch.tensor([0.0, 1.0, 2.0, 3.0])
Y = torch.tensor([1.0, -1.0, 0.5, 0.0])

HEADERS = "#include <tvm/ffi/container/tensor.h>\n#include <tvm/ffi/function.h>\n#include <tvm/ffi/optional.h>\n"


def cpp_solution(body: str, entry: str = "kernel.cpp::run", **kw):
    return solution_from_sources({"kernel.cpp": HEADERS + body}, language="cpp", entry_point=entry, **kw)


@pytest.fixture
def opts(cache_dir: Path) -> BuildOptions:
    return BuildOptions(cache_dir=cache_dir, cuda_arch="sm_90a")


@pytest.fixture(scope="module")
def cpp_runnable(example_solution, toy_definition, tmp_path_factory):
    """The C++ example, built once for the tests that only call it."""
    sol = example_solution("cpp_tvm", language="cpp", entry_point="kernel.cpp::run")
    runnable = build(sol, toy_definition, BuildOptions(cache_dir=tmp_path_factory.mktemp("c")))
    yield runnable
    runnable.close()


@pytest.mark.parametrize("y", [Y, None], ids=["with_y", "y_none"])
def test_cpp_module_is_called_with_tensors_optional_double_and_int64(cpp_runnable, y) -> None:
    out, neg = torch.full((4,), float("nan")), torch.full((4,), float("nan"))
    result = cpp_runnable.run([X, y, 2.5, 3], [out, neg])
    assert result[0] is out and result[1] is neg
    want = 2.5 * X + 3 + (0 if y is None else y)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(neg, -want)
    assert cpp_runnable.meta["param_types"] == [
        "DLTensor*", "Optional<DLTensor*>", "float", "int", "DLTensor*", "DLTensor*"]


def test_wrong_argument_count_at_call_time_is_a_type_error(cpp_runnable) -> None:
    with pytest.raises(TypeError, match="Expected 6 but got 5"):
        cpp_runnable(X, None, 2.5, 3, torch.empty(4))


def test_second_build_is_a_cache_hit_in_the_solution_hash_folder(example_solution, toy_definition, opts) -> None:
    sol = example_solution("cpp_tvm", language="cpp", entry_point="kernel.cpp::run")
    first = build(sol, toy_definition, opts)
    first.close()
    second = build(sol, toy_definition, opts)
    assert (first.meta["cached"], second.meta["cached"]) == (False, True)
    slot = Path(second.meta["build_dir"])
    assert slot.parent.name == sol.hash()
    assert slot.parent.parent == opts.cache_dir / "builds"
    flagged = build(sol, toy_definition, BuildOptions(cache_dir=opts.cache_dir, extra_cflags=["-O1"]))
    assert flagged.meta["cached"] is False and flagged.meta["build_dir"] != second.meta["build_dir"]


def test_cuda_module_compiles_without_gpu_for_the_given_arch(example_solution, toy_definition, opts) -> None:
    sol = example_solution("cuda_tvm", language="cuda", entry_point="kernel.cu::run")
    runnable = build(sol, toy_definition, BuildOptions(cache_dir=opts.cache_dir, cuda_arch="10.0a"))
    assert runnable.meta["archs"] == ["sm_100a"]
    assert callable(runnable.fn) and Path(runnable.meta["library"]).is_file()
    assert runnable.meta["param_types"][1] == "Optional<DLTensor*>"
    runnable.close()


def test_cuda_without_gpu_or_arch_asks_for_cuda_arch(example_solution, toy_definition, cache_dir, monkeypatch) -> None:
    monkeypatch.setattr(arch_mod, "detect_cuda_arch", lambda: None)
    monkeypatch.delenv("FIB_CUDA_ARCH", raising=False)
    sol = example_solution("cuda_tvm", language="cuda", entry_point="kernel.cu::run")
    with pytest.raises(BuildError) as info:
        build(sol, toy_definition, BuildOptions(cache_dir=cache_dir))
    assert "cuda_arch" in str(info.value) and "FIB_CUDA_ARCH" in str(info.value)


def test_compile_error_carries_the_compiler_lines(toy_definition, opts) -> None:
    sol = cpp_solution("void run(tvm::ffi::TensorView x) {\n  undefined_thing(x);\n}\n"
                       "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);\n", name="broken")
    with pytest.raises(BuildError) as info:
        build(sol, toy_definition, opts)
    first, *lines = str(info.value).splitlines()
    assert first.startswith("broken: cpp build failed (tvm-ffi)") and "full log:" in first
    assert any(line.strip().startswith("kernel.cpp:5:") and "undefined_thing" in line for line in lines)
    assert len(lines) <= 21 and "Traceback" not in str(info.value)
    assert info.value.log_path.read_text()  # the whole output is kept beside the cache
    assert not list(opts.cache_dir.glob("builds/*/*/build.json"))  # nothing half-built cached


def test_cuda_compile_error_shows_nvcc_lines(toy_definition, opts) -> None:
    sol = solution_from_sources(
        {"k.cu": HEADERS + "__global__ void k(float* p) { p[0] = missing_value; }\n"},
        language="cuda", entry_point="k.cu::run")
    with pytest.raises(BuildError) as info:
        build(sol, toy_definition, opts)
    assert any("k.cu(4): error" in line and "missing_value" in line for line in info.value.compiler_lines)


def test_missing_export_lists_the_exported_names(toy_definition, opts) -> None:
    sol = cpp_solution("void kernel(tvm::ffi::TensorView x) {}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(kernel_fn, kernel);\n")
    with pytest.raises(BuildError) as info:
        build(sol, toy_definition, opts)
    msg = str(info.value)
    assert "exports no function 'run'" in msg and "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run," in msg
    assert "exported now: kernel_fn" in msg


def test_float_scalar_declared_as_int_is_caught_before_running(toy_definition, opts) -> None:
    sol = cpp_solution(
        "using tvm::ffi::TensorView;\n"
        "void run(TensorView x, tvm::ffi::Optional<TensorView> y, int64_t alpha, int64_t shift,"
        " TensorView out, TensorView neg) {}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);\n")
    with pytest.raises(SignatureError) as info:
        build(sol, toy_definition, opts)
    assert str(info.value) == (
        "run: parameter 2 (alpha) is declared int, but the definition passes a float32 scalar: "
        "declare it `double`")


def test_optional_input_declared_as_plain_tensor_is_caught(toy_definition, opts) -> None:
    sol = cpp_solution(
        "using tvm::ffi::TensorView;\n"
        "void run(TensorView x, TensorView y, double alpha, int64_t shift, TensorView out,"
        " TensorView neg) {}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);\n")
    with pytest.raises(SignatureError, match=r"tvm::ffi::Optional<tvm::ffi::TensorView>"):
        build(sol, toy_definition, opts)


def test_dps_count_mismatch_names_the_config_key(toy_definition, opts) -> None:
    sol = cpp_solution(
        "using tvm::ffi::TensorView;\n"
        "void run(TensorView x, tvm::ffi::Optional<TensorView> y, double alpha, int64_t shift) {}\n"
        "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);\n")
    with pytest.raises(SignatureError) as info:
        build(sol, toy_definition, opts)
    msg = str(info.value)
    assert msg.startswith("expected run(x, y, alpha, shift, out, neg) (destination-passing style")
    assert "`destination_passing_style = false` under [build] in config.toml" in msg


def test_missing_nvcc_says_how_to_install(example_solution, toy_definition, opts, monkeypatch) -> None:
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(toolchain, "_candidates", lambda: [])
    sol = example_solution("cuda_tvm", language="cuda", entry_point="kernel.cu::run")
    with pytest.raises(BuildError, match="nvcc not found.*CUDA_HOME"):
        build(sol, toy_definition, opts)


def test_bogus_cuda_home_is_reported(example_solution, toy_definition, opts, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    sol = example_solution("cuda_tvm", language="cuda", entry_point="kernel.cu::run")
    with pytest.raises(BuildError, match=f"CUDA_HOME={tmp_path} has no bin/nvcc"):
        build(sol, toy_definition, opts)


def test_missing_ninja_says_how_to_install(example_solution, toy_definition, opts, monkeypatch) -> None:
    real_which = toolchain.shutil.which
    monkeypatch.setattr(toolchain.shutil, "which", lambda name, *a, **k: None if name == "ninja" else real_which(name, *a, **k))
    monkeypatch.setitem(__import__("sys").modules, "ninja", None)
    sol = example_solution("cpp_tvm", language="cpp", entry_point="kernel.cpp::run")
    with pytest.raises(BuildError, match="ninja not found.*pip install ninja"):
        build(sol, toy_definition, opts)


CUTLASS_USER = HEADERS + (
    "#include <cutlass/cutlass.h>\n"
    "void run(tvm::ffi::TensorView x, tvm::ffi::Optional<tvm::ffi::TensorView> y, double alpha,"
    " int64_t shift, tvm::ffi::TensorView out, tvm::ffi::TensorView neg) {\n"
    "  static_cast<float*>(out.data_ptr())[0] = FAKE_CUTLASS_MARKER;\n}\n"
    "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);\n")


def test_cutlass_dependency_adds_its_include_folder(toy_definition, opts, monkeypatch, tmp_path) -> None:
    header = tmp_path / "cutlass-src" / "include" / "cutlass" / "cutlass.h"
    header.parent.mkdir(parents=True)
    header.write_text("#pragma once\n#define FAKE_CUTLASS_MARKER 42.0f\n")
    monkeypatch.setenv("CUTLASS_HOME", str(tmp_path / "cutlass-src"))
    sol = solution_from_sources({"kernel.cpp": CUTLASS_USER}, language="cpp",
                                entry_point="kernel.cpp::run", dependencies=["CUTLASS_3_7"])
    with build(sol, toy_definition, opts) as runnable:
        out = torch.zeros(4)
        runnable.run([X, None, 1.0, 0], [out, torch.zeros(4)])
        assert out[0].item() == 42.0


def test_missing_cutlass_says_how_to_get_it(toy_definition, opts, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(deps, "_cutlass_roots", lambda: [tmp_path])
    sol = solution_from_sources({"kernel.cpp": CUTLASS_USER}, language="cpp",
                                entry_point="kernel.cpp::run", dependencies=["CUTLASS_3_7"])
    with pytest.raises(BuildError) as info:
        build(sol, toy_definition, opts)
    msg = str(info.value)
    assert "dependency CUTLASS_3_7" in msg and "-b v3.7.0" in msg and "CUTLASS_HOME" in msg


def test_relative_include_dir_inside_the_sources(toy_definition, opts) -> None:
    sources = {
        "kernel.cpp": HEADERS + '#include "consts.h"\nvoid run(tvm::ffi::TensorView x, tvm::ffi::Optional<tvm::ffi::TensorView> y, double a, int64_t s, tvm::ffi::TensorView out, tvm::ffi::TensorView neg) {\n  static_cast<float*>(out.data_ptr())[0] = SEVEN;\n}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);\n',
        "include/consts.h": "#define SEVEN 7.0f\n",
    }
    sol = solution_from_sources(sources, language="cpp", entry_point="kernel.cpp::run")
    options = BuildOptions(cache_dir=opts.cache_dir, include_dirs=["include"])
    with build(sol, toy_definition, options) as runnable:
        out = torch.zeros(4)
        runnable.run([X, None, 1.0, 0], [out, torch.zeros(4)])
        assert out[0].item() == 7.0


