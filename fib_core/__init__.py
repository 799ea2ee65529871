"""fib_core: a small, vendorable benchmark core for FlashInfer-Trace kernel contests.

Read ``docs/design.md`` for the map of packages. The most used names are re-exported here
lazily, so ``import fib_core`` stays cheap (no torch import) for scripts that only read data.
They are the names the organizers' ``flashinfer_bench`` package exposes at its top level, so
``import fib_core as fib`` can stand in for ``import flashinfer_bench as fib``::

    import fib_core as fib

    trace_set = fib.TraceSet.from_path("my-dataset")
    bench = fib.Benchmark(trace_set)
    results = bench.evaluate(fib.BenchmarkConfig(iterations=20))
"""

from __future__ import annotations

from fib_core._lazy import lazy_attributes

__version__ = "0.1.0"

_DATA_NAMES = (
    "AxisConst",
    "AxisVar",
    "BuildSpec",
    "Correctness",
    "Definition",
    "Environment",
    "Evaluation",
    "EvaluationStatus",
    "Performance",
    "RandomInput",
    "SafetensorsInput",
    "ScalarInput",
    "Solution",
    "SourceFile",
    "SupportedLanguages",
    "TensorSpec",
    "Trace",
    "TraceSet",
    "Workload",
)

# name -> module that defines it (imported on first access).
_LAZY: dict[str, str] = {
    **dict.fromkeys(_DATA_NAMES, "fib_core.data"),
    "Benchmark": "fib_core.bench",
    "BenchmarkConfig": "fib_core.bench",
    "apply": "fib_core.apply",
    "enable_apply": "fib_core.apply",
    "disable_apply": "fib_core.apply",
    "enable_tracing": "fib_core.tracer",
    "disable_tracing": "fib_core.tracer",
    "get_tracer": "fib_core.tracer",
    "TracingRule": "fib_core.tracer",
}

__all__ = sorted(_LAZY)


def _bind_apply() -> None:
    """``fib_core.apply`` is both a subpackage and, here, the ``apply`` function (as in the
    organizers' package). Importing the subpackage binds the module to this attribute, so the
    function is bound eagerly, after it: ``fib.apply`` is always the decorator. Light: the
    apply package does not import torch."""
    try:
        # Imported here: the functions are bound after the subpackage of the same name (docstring).
        from fib_core.apply import apply, disable_apply, enable_apply
    except ModuleNotFoundError as err:
        if err.name != "fib_core.apply":
            raise
        return
    globals().update(apply=apply, disable_apply=disable_apply, enable_apply=enable_apply)


_bind_apply()


__getattr__ = lazy_attributes(__name__, _LAZY, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
