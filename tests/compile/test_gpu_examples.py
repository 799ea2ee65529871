"""On a GPU: the Triton, tvm-ffi CUDA and torch CUDA examples compute the right values on
CUDA tensors, launched on torch's *current* stream.

The stream check is behavioural: on a side stream we poison the input, sleep on the GPU, then
write the real input and call the solution. A kernel launched on any other stream runs before
the real input lands and produces wrong values.
"""

from __future__ import annotations

import pytest
import torch

from fib_core.compile import BuildOptions, build
from fib_core.compile.arch import arch_for_capability

from .conftest import incomplete_cuda_toolkit

pytestmark = pytest.mark.gpu

EXAMPLES = {
    "triton": ("triton_dps", {"language": "triton", "entry_point": "kernel.py::run"}),
    "tvm-ffi": ("cuda_tvm", {"language": "cuda", "entry_point": "kernel.cu::run"}),
    "torch": ("cuda_torch", {"language": "cuda", "entry_point": "kernel.cu::run", "binding": "torch"}),
}


def _nvcc_matches_torch() -> bool:
    from fib_core.compile.toolchain import find_cuda_home, nvcc_version

    have = nvcc_version(find_cuda_home())
    return bool(torch.version.cuda) and have.split(".")[0] == torch.version.cuda.split(".")[0]


@pytest.fixture(scope="module")
def gpu_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("gpu_cache")


@pytest.mark.parametrize("with_y", [True, False], ids=["with_y", "y_none"])
@pytest.mark.parametrize("kind", list(EXAMPLES))
def test_example_is_correct_on_the_current_stream(kind, with_y, example_solution, toy_definition, gpu_cache) -> None:
    if kind == "torch" and not _nvcc_matches_torch():
        pytest.skip(f"nvcc major differs from torch's CUDA {torch.version.cuda}: torch refuses to build")
    if kind == "torch" and (reason := incomplete_cuda_toolkit()):
        pytest.skip(reason)
    folder, spec = EXAMPLES[kind]
    # no cuda_arch given: detected from the GPU (sm_90a on H100/H200)
    runnable = build(example_solution(folder, **spec), toy_definition, BuildOptions(cache_dir=gpu_cache))
    if kind != "triton":
        detected = arch_for_capability(*torch.cuda.get_device_capability()).sm
        assert runnable.meta["archs"] == [detected]
    n = 1 << 20
    gen = torch.Generator(device="cuda").manual_seed(0)
    x_real = torch.randn(n, device="cuda", generator=gen)
    y = torch.randn(n, device="cuda", generator=gen) if with_y else None
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.full((n,), float("nan"), device="cuda")
        out = torch.full((n,), float("nan"), device="cuda")
        neg = torch.full((n,), float("nan"), device="cuda")
        torch.cuda._sleep(50_000_000)  # tens of ms: other streams would overtake
        x.copy_(x_real)
        runnable.run([x, y, 0.5, 7], [out, neg])
    side.synchronize()
    want = 0.5 * x_real + 7 + (y if with_y else 0)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(neg, -want)
    runnable.close()
