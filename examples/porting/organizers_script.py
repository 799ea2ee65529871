"""A script written the flashinfer-bench way, run against this kit.

Only the import differs from the organizers' tool (``flashinfer_bench`` -> ``fib_core``):
load a dataset, build a solution through the builder registry and call it by keyword, run the
benchmark with ``Benchmark(trace_set).run(config)``, write the traces with ``flush()`` and read
``Trace.is_successful()``. Exit status 0 when every trace passed.

    python examples/porting/make_tiny_dataset.py /tmp/tiny-dataset
    python examples/porting/organizers_script.py /tmp/tiny-dataset
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run from a checkout

# --- the organizers' way from here on (flashinfer_bench -> fib_core) -------------------------
import torch  # noqa: E402

import fib_core as fib  # noqa: E402
from fib_core.bench import Benchmark, BenchmarkConfig  # noqa: E402
from fib_core.compile.registry import get_registry  # noqa: E402
from fib_core.data import Definition, Trace, TraceSet, load_json_file, load_jsonl_file  # noqa: E402
from fib_core.utils import list_cuda_devices, torch_dtype_from_def  # noqa: E402


def main(dataset: str) -> int:
    root = Path(dataset)
    trace_set = TraceSet.from_path(dataset)
    definition_file = sorted((root / "definitions").rglob("*.json"))[0]
    definition = load_json_file(definition_file, Definition)
    workload_file = sorted((root / "workloads").rglob(f"{definition.name}.jsonl"))[0]
    workloads = load_jsonl_file(workload_file, Trace)
    print(
        f"{definition.name}: var axes {definition.get_var_axes()}, "
        f"const axes {definition.get_const_axes()}, {len(workloads)} workloads"
    )

    # Build every solution through the registry and call it with keyword arguments.
    devices = list_cuda_devices()
    device = devices[0] if devices else "cpu"
    axes = workloads[0].workload.axes
    shapes = definition.get_input_shapes(axes)
    inputs = {}
    for name, spec in definition.inputs.items():
        if shapes[name] is None:
            inputs[name] = workloads[0].workload.inputs[name].value
        else:
            dtype = torch_dtype_from_def(spec.dtype)
            inputs[name] = torch.randn(shapes[name], dtype=dtype, device=device)
    registry = get_registry()
    expected = registry.build_reference(definition)(**inputs)
    for solution in trace_set.solutions[definition.name]:
        runnable = registry.build(definition, solution)
        got = runnable(**inputs)
        torch.testing.assert_close(got, expected)
        print(f"{solution.name}: keyword call matches the reference")
    registry.clear()

    # Benchmark the whole dataset, the reference-listing way.
    config = BenchmarkConfig(warmup_runs=1, iterations=5, num_trials=1)
    bench = Benchmark(trace_set, log_level="WARNING")
    bench.run(config)
    bench.flush()

    reloaded = fib.TraceSet.from_path(dataset)
    traces = [t for ts in reloaded.traces.values() for t in ts]
    for trace in traces:
        perf = trace.evaluation.performance
        speedup = f"{perf.speedup_factor:.2f}x" if perf is not None else "-"
        print(
            f"{trace.solution:16s} {trace.workload.uuid:14s} "
            f"{trace.evaluation.status.value:20s} successful={trace.is_successful()} {speedup}"
        )
    best = reloaded.get_best_trace(definition.name)
    print(f"best: {best.solution if best else None}")
    bench.close()
    passed = bool(traces) and all(t.is_successful() for t in traces)
    print("all traces passed" if passed else "some traces failed")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
