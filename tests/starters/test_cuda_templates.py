"""The CUDA (tvm-ffi) templates: they build with nvcc without a GPU, export ``run`` with the
parameter kinds the engine passes, check their inputs, and say plainly that the kernel is the
contestant's to write instead of returning garbage.

Each template is built once per test session (sm_90a, the session's build cache) and shared by
the tests below.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = (
    "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
    "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64",
    "gdn_prefill_qk4_v8_d128_k_last",
    "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048",
)
NOT_WRITTEN = "yours to write"

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


def _definition(name: str) -> Any:
    from fib_core.data.definition import Definition
    from fib_core.dataset.embedded import definition_dict

    return Definition.from_dict(definition_dict(name))


def _source(name: str) -> str:
    return (REPO / "starters" / name / "cuda" / "kernel.cu").read_text(encoding="utf-8")


def _build(name: str) -> Any:
    """Build the template the way the kit builds a contestant's CUDA solution."""
    pytest.importorskip("tvm_ffi")
    from fib_core.compile import BuildOptions, build
    from fib_core.data.solution import BuildSpec, Solution, SourceFile

    solution = Solution(
        name=f"template-{name}",
        definition=name,
        author="fib-core-tests",
        spec=BuildSpec(language="cuda", target_hardware=["H100"], entry_point="kernel.cu::run",
                       destination_passing_style=True, binding="tvm-ffi"),
        sources=[SourceFile(path="kernel.cu", content=_source(name))],
    )
    return build(solution, _definition(name), BuildOptions(cuda_arch="sm_90a"))


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    """name -> Runnable, filled lazily so that one failing template does not hide the others."""
    cache: dict[str, Any] = {}
    yield cache
    for runnable in cache.values():
        runnable.close()


def _runnable(built: dict[str, Any], name: str) -> Any:
    if name not in built:
        built[name] = _build(name)
    return built[name]


def _arguments(name: str, device: str) -> list:
    """One argument per input then output, of the right kind, dtype and rank (sizes of 1)."""
    from fib_core.data.dtypes import torch_dtype

    definition = _definition(name)
    args: list = []
    for spec in [*definition.inputs.values(), *definition.outputs.values()]:
        if spec.shape is None:
            args.append(0.5 if spec.dtype.startswith("float") else 0)
        elif getattr(spec, "optional", False):
            args.append(None)
        else:
            dims = [1] * len(spec.shape)
            args.append(torch.zeros(dims, dtype=torch_dtype(spec.dtype), device=device))
    return args


@pytest.mark.parametrize("name", TEMPLATES)
def test_template_builds_and_exports_run(built: dict[str, Any], name: str) -> None:
    runnable = _runnable(built, name)
    definition = _definition(name)
    params = runnable.meta.get("param_types")
    specs = [*definition.inputs.values(), *definition.outputs.values()]
    assert params is not None and len(params) == len(specs)
    for spec, ptype in zip(specs, params, strict=True):
        if spec.shape is None:
            assert ptype == ("float" if spec.dtype.startswith("float") else "int"), spec
        elif getattr(spec, "optional", False):
            assert ptype.startswith("Optional<"), spec
        else:
            assert "Tensor" in ptype, spec


@pytest.mark.parametrize("name", TEMPLATES)
def test_template_checks_its_inputs(built: dict[str, Any], name: str) -> None:
    """CPU tensors are refused with a message naming the first input, before any launch."""
    runnable = _runnable(built, name)
    first = next(iter(_definition(name).inputs))
    with pytest.raises(ValueError, match=rf"{first}: expected a CUDA tensor"):
        runnable.fn(*_arguments(name, "cpu"))


@pytest.mark.parametrize("name", TEMPLATES)
def test_template_documents_every_parameter(name: str) -> None:
    """Every parameter of run() carries a layout comment; the export line and stream are there."""
    source = _source(name)
    start = source.index("void run(")
    signature = source[start : source.index("\n", source.index("{", start))]
    definition = _definition(name)
    for param in [*definition.inputs, *definition.outputs]:
        declared = re.compile(rf"(TensorView>?|double|int64_t)\s+{param}\b")
        line = next((x for x in signature.splitlines() if declared.search(x)), None)
        assert line is not None, f"run() has no parameter {param}"
        assert "//" in line, f"parameter {param} has no layout comment"
    assert "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);" in source
    assert "TVMFFIEnvGetStream(" in source
    assert "TVM_FFI_THROW(NotImplementedError)" in source and NOT_WRITTEN in source


@pytest.mark.gpu
@pytest.mark.parametrize("name", TEMPLATES)
def test_template_says_the_kernel_is_not_written(built: dict[str, Any], name: str) -> None:
    """With valid CUDA inputs the call gets past the checks and reports the missing kernel."""
    runnable = _runnable(built, name)
    with pytest.raises(Exception, match=NOT_WRITTEN):
        runnable.fn(*_arguments(name, "cuda"))
