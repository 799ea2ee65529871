"""Per-call overhead of an ``apply``-routed call over a direct call of the same Runnable.

    python benchmarks/bench_apply.py                # GPU when present, else CPU
    python benchmarks/bench_apply.py --device cpu --calls 20000
    python benchmarks/bench_apply.py --quick        # 200 calls (CI smoke)

A toy definition (y = x, x of shape [n, 64]) with one destination-passing Python solution;
each variant runs ``--calls`` times after a warm-up and the mean host time per call is printed:

- direct:        runnable.fn(x, y) into a preallocated y
- direct+alloc:  y = torch.empty(...); runnable.fn(x, y)   (what a routed call must also do)
- routed:        the @apply-decorated function, runtime enabled, key recorded
- miss:          the decorated function at an unrecorded shape (runs the original)
- disabled:      the decorated function with apply off (no runtime, no hook)

Overhead = routed - direct+alloc (the target is under 10 us on a GPU machine).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from fib_core.apply import (  # noqa: E402
    ApplyConfig,
    ApplyRuntime,
    apply,
    set_runtime,  # noqa: E402
)
from fib_core.data import (  # noqa: E402
    Correctness,
    Definition,
    Environment,
    Evaluation,
    EvaluationStatus,
    Performance,
    RandomInput,
    Solution,
    Trace,
    TraceSet,
    Workload,
)

DEF = "bench_copy"
N = 16


def trace_set() -> TraceSet:
    ts = TraceSet(root=None)
    ts.add_definition(
        Definition.from_dict(
            {
                "name": DEF,
                "op_type": "bench",
                "axes": {"n": {"type": "var"}, "d": {"type": "const", "value": 64}},
                "inputs": {"x": {"shape": ["n", "d"], "dtype": "float32"}},
                "outputs": {"y": {"shape": ["n", "d"], "dtype": "float32"}},
                "reference": "def run(x):\n    return x.clone()\n",
            }
        )
    )
    ts.add_solution(
        Solution.from_dict(
            {
                "name": "copy",
                "definition": DEF,
                "author": "bench",
                "spec": {
                    "language": "python",
                    "target_hardware": ["any"],
                    "entry_point": "main.py::run",
                    "destination_passing_style": True,
                },
                "sources": [{"path": "main.py", "content": "def run(x, y):\n    y.copy_(x)\n"}],
            }
        )
    )
    ev = Evaluation(
        status=EvaluationStatus.PASSED,
        log="",
        environment=Environment(hardware="bench"),
        timestamp="2026-01-01T00:00:00",
        correctness=Correctness(0.0, 0.0),
        performance=Performance(0.01, 0.02, 2.0),
    )
    workload = Workload(uuid="bench", axes={"n": N}, inputs={"x": RandomInput()})
    ts.add_traces([Trace(definition=DEF, workload=workload, solution="copy", evaluation=ev)])
    return ts


@apply(DEF)
def copy_fn(x):
    return x.clone()


def per_call_us(fn, calls: int, device: str) -> float:
    for _ in range(min(1000, calls)):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=["cuda", "cpu"])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--quick", action="store_true", help="200 calls (CI smoke)")
    a = p.parse_args()
    if a.quick:
        a.calls = min(a.calls, 200)
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    with tempfile.TemporaryDirectory() as cache:
        runtime = ApplyRuntime(trace_set(), ApplyConfig(), cache_dir=cache)
        runnable = runtime._runnables["copy"]
        x = torch.randn(N, 64, device=device)
        x_miss = torch.randn(N + 1, 64, device=device)
        y = torch.empty_like(x)
        fn = runnable.fn
        rows = {
            "direct": lambda: fn(x, y),
            "direct+alloc": lambda: fn(x, torch.empty((N, 64), dtype=torch.float32, device=device)),
        }
        results = {name: per_call_us(f, a.calls, device) for name, f in rows.items()}
        results["disabled"] = per_call_us(lambda: copy_fn(x), a.calls, device)
        set_runtime(runtime)
        try:
            assert torch.equal(copy_fn(x), x) and runtime.stats["hits"] == 1
            results["routed"] = per_call_us(lambda: copy_fn(x), a.calls, device)
            results["miss"] = per_call_us(lambda: copy_fn(x_miss), a.calls, device)
        finally:
            set_runtime(None)
            runtime.close()
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"apply overhead on {name} ({a.calls} calls per variant, best of 3, us per call)")
    for key in ("direct", "direct+alloc", "routed", "miss", "disabled"):
        print(f"  {key:<13} {results[key]:8.2f}")
    overhead = results["routed"] - results["direct+alloc"]
    print(f"routed - direct+alloc: {overhead:.2f} us (target < 10 us on a GPU)")
    print(f"routed - direct:       {results['routed'] - results['direct']:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
