"""Solution -> Runnable: build any solution into one callable, with a build cache.

Public API (see docs/design.md)::

    from fib_core.compile import build, BuildOptions
    runnable = build(solution, definition, BuildOptions(cuda_arch="sm_100a"))
    outputs = runnable.run(inputs, outputs)   # always a tuple, in the definition's order
    runnable.close()

``build`` raises ``BuildError`` (failed build: the first line says what, the next lines are the
compiler's own error lines, at most ~20; also in ``err.compiler_lines``) or ``SignatureError``
(the entry function cannot take the definition's arguments), never a Python traceback from the
compiler, and never runs the solution.

Contracts kernel authors and the other packages rely on
-------------------------------------------------------
Entry point ``"file.ext::name"`` (``spec.entry_point``):

- ``python`` / ``triton``: the sources are written to a private folder as one package; the
  entry file is imported as a module of that package, so ``from .util import helper`` between
  the solution's files works (use relative imports). ``name`` is a Python function.
- ``cuda`` / ``cpp`` with ``binding = "tvm-ffi"`` (the default): every ``.cu/.cpp/.cc/.c``
  source is compiled into one shared library with apache-tvm-ffi's ``tvm_ffi.cpp.build``;
  the source root is on the include path. ``name`` is the symbol exported with
  ``TVM_FFI_DLL_EXPORT_TYPED_FUNC(name, impl)``.
- ``cuda`` / ``cpp`` with ``binding = "torch"``: ``torch.utils.cpp_extension.load``; ``name``
  is a pybind11 function (``PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("name", &impl); }``)
  or an operator ``TORCH_LIBRARY(ns, m)`` reached as ``torch.ops.ns.name``.

Arguments are positional, in the definition's order: inputs, then (destination-passing style,
``destination_passing_style = true``, the default) the preallocated outputs. A value-returning
function returns one tensor or a tuple/list in the outputs' order.

How each argument arrives in a tvm-ffi function (checked by a test that compiles and calls a
C++ module with CPU tensors; the builder also checks the declared kinds before the first call):

- tensor input/output -> ``tvm::ffi::TensorView`` (``data_ptr() ndim() size(i) stride(i)
  numel() dtype() device()``); ``tvm::ffi::Tensor`` also works.
- float scalar (``shape: null``, float dtype) -> ``double``.
- int scalar -> ``int64_t``; bool scalar -> ``bool``.
- optional input that may be None (``"optional": true``) ->
  ``tvm::ffi::Optional<tvm::ffi::TensorView>`` (``has_value()``, ``value()``); include
  ``<tvm/ffi/optional.h>``.
- stream: launch on ``TVMFFIEnvGetStream(x.device().device_type, x.device().device_id)``
  (``<tvm/ffi/extra/c_env_api.h>``): torch's current stream during the call.

In torch-binding functions: ``at::Tensor``, ``std::optional<at::Tensor>``, ``double``,
``int64_t``; launch on ``at::cuda::getCurrentCUDAStream()``.

Build settings (``BuildOptions``; in a fork, ``[build]`` in config.toml):
``cuda_arch`` accepts "sm_90a", "sm_100a", "90a", "9.0a", "10.0a" (several: comma separated);
unset -> ``$FIB_CUDA_ARCH`` -> detected from the GPU (Hopper -> sm_90a, B200 -> sm_100a); with
no GPU and nothing set, a BuildError says to set it. Plain ``sm_100`` cannot use Blackwell-only
instructions. ``extra_cuda_cflags``, ``extra_cflags``, ``extra_ldflags``, ``include_dirs``.
``CUDA_HOME`` is discovered (env, then nvcc on PATH, then /usr/local/cuda*); a missing nvcc or
ninja is a BuildError saying what to install. ``spec.dependencies`` naming CUTLASS
("CUTLASS_3_7") add the CUTLASS include folders from ``$CUTLASS_HOME``/``$CUTLASS_PATH`` or
common install places, else a BuildError says how to get them.

Cache: ``$FIB_CACHE_DIR`` (default ``~/.cache/fib_core``), compiled builds under
``builds/<Solution.hash()>/<options key>/`` (the options key digests arch, flags, include
folders, tool versions). Two processes building the same solution wait on a file lock
(``BuildOptions.lock_timeout_s``) and the finished build is moved into place atomically; an
unwritable cache folder is a BuildError naming the folder and ``FIB_CACHE_DIR``. Python and
Triton solutions are not compiled here and use a private temporary folder instead.

``Runnable``: ``fn`` (raw function), ``dps``, ``definition``, ``solution``, ``meta`` (builder,
``build_dir``, ``cached``, ``archs``...), ``__call__(*args)`` (raw call), ``__call__(**inputs)``
(by name; returns the output, or a tuple of them, in either style), ``run(inputs,
outputs=None) -> tuple``, ``close()`` (releases the module; deletes private build folders,
keeps the cache).

The organizers' spellings, over the same ``build``: ``get_registry().build(definition,
solution)`` / ``.build_reference(definition)``, the builder classes ``PythonBuilder``,
``TritonBuilder``, ``CUDABuilder`` in :mod:`.builders` (``can_build``, ``build(definition,
solution)``, ``clear_cache``), and ``Builder`` (their abstract base, :mod:`.builder`). The
back-end protocol that ``register_builder`` takes is :class:`.builders.base.Builder`.
"""

from __future__ import annotations

from fib_core.errors import BuildError

from .arch import CudaArch, parse_cuda_arch, resolve_cuda_arch
from .build import build
from .builder import Builder
from .builders.base import Built, find_builder, register_builder
from .options import BuildOptions, default_cache_dir
from .registry import BuilderRegistry, get_registry
from .runnable import Runnable
from .signature import check_signature

__all__ = [
    "BuildError",
    "BuildOptions",
    "Builder",
    "BuilderRegistry",
    "Built",
    "CudaArch",
    "Runnable",
    "build",
    "check_signature",
    "default_cache_dir",
    "find_builder",
    "get_registry",
    "parse_cuda_arch",
    "register_builder",
    "resolve_cuda_arch",
]
