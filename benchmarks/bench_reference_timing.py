"""The kit's reference latency timed several ways: device-side spans against CUDA events.

The evaluator times a definition's reference with the solution's method (the organizers time
both sides with one CUPTI span), except that the judge's CUPTI timer becomes the profiler
outside ``--contest``. Under a tracer the reference's many small launches slow down, so its
span may read higher than CUDA events around the call. This prints, per workload, the
reference latency as the evaluator measures it (same warm-up, iteration count and L2 flush)
with ``events``, ``profiler`` (a plain run's) and, when ``cupti-python`` is installed,
``cupti`` (the judge's, as ``--contest`` times it), and the ratio of each to events: the
speedup the kit reports moves by that ratio.

    python benchmarks/bench_reference_timing.py [--definitions NAME ...] [--per-def 2]
    python benchmarks/bench_reference_timing.py --methods events profiler  # skip the slow one
    python benchmarks/bench_reference_timing.py --quick   # one small workload; on a CPU: inputs
                                                          # only, then exit 3 (needs a GPU)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from bench_common import needs_gpu

from fib_core.bench.evaluation.inputs import generate_inputs
from fib_core.bench.evaluation.timers import available_methods, measure
from fib_core.bench.grading import eval_settings
from fib_core.data.traceset import TraceSet
from fib_core.dataset import embedded_dataset_path
from fib_core.dataset.references import reference_run

QUICK_DEFINITION = "gdn_decode_qk4_v8_d128_k_last"


def pick(traces: list, count: int) -> list:
    """``count`` workloads spread from the smallest to the largest (by the product of axes)."""

    def size(t) -> int:
        n = 1
        for v in t.workload.axes.values():
            n *= max(1, int(v))
        return n

    ranked = sorted(traces, key=size)
    if len(ranked) <= count:
        return ranked
    return [ranked[round(i * (len(ranked) - 1) / max(1, count - 1))] for i in range(count)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--definitions", nargs="*", default=None)
    parser.add_argument("--per-def", type=int, default=2, help="workloads timed per definition")
    parser.add_argument("--budget-s", type=float, default=100.0, help="stop timing after this")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--quick", action="store_true", help="one small workload of one definition")
    parser.add_argument("--methods", nargs="*", default=None,
                        help="only these (default: every method usable here)")
    args = parser.parse_args(argv)

    gpu = torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    root = embedded_dataset_path()
    ts = TraceSet.from_path(root)
    names = args.definitions or sorted(ts.definitions)
    unknown = [n for n in names if n not in ts.definitions]
    if unknown:
        print(
            f"error: unknown definition {unknown[0]!r}; known: {', '.join(sorted(ts.definitions))}",
            file=sys.stderr,
        )
        return 2
    if args.quick:
        names, args.per_def = [QUICK_DEFINITION], 1
    methods = ["events"] + [m for m in available_methods("cuda") if m != "events"]
    if args.methods:
        unusable = [m for m in args.methods if m not in methods]
        if unusable:
            print(f"error: --methods {unusable[0]!r} is not usable here; usable: "
                  f"{', '.join(methods)}", file=sys.stderr)
            return 2
        methods = ["events"] + [m for m in args.methods if m != "events"]
    print(
        f"device: {torch.cuda.get_device_name() if gpu else 'cpu'}; methods: {', '.join(methods)}"
        "; the evaluator's counts: one warm-up call, then each definition's timed_calls"
    )
    header = f"{'definition':32} {'axes':30} " + " ".join(f"{m + ' ms':>12}" for m in methods)
    print(header + "".join(f" {m + '/ev':>11}" for m in methods[1:]))
    rows, started = [], time.monotonic()
    for name in names:
        definition = ts.definitions[name]
        fn = reference_run(definition)
        traces = ts.workloads[name]
        if args.quick:
            traces = [t for t in traces if t.workload.extra.get("tags")] or traces
        for trace in pick(traces, args.per_def):
            if time.monotonic() - started > args.budget_s:
                print(f"(time budget of {args.budget_s:.0f} s spent: stopping)")
                break
            inputs = generate_inputs(
                definition, trace.workload, seed=0, device=device, dataset_root=root
            )
            if not gpu:
                return needs_gpu(
                    "bench_reference_timing.py",
                    f"built the inputs of {name} {trace.workload.uuid[:8]}",
                )
            figures = {}
            for method in methods:
                result = measure(
                    lambda i, f=fn, a=inputs: f(*a),
                    lambda i: None,
                    device="cuda",
                    method=method,
                    warmup=1,
                    iterations=eval_settings(name).reference_timed_calls,
                    trials=1,
                )
                figures[result.method] = result.latency_ms
            axes = ",".join(f"{k}={v}" for k, v in trace.workload.axes.items())
            line = f"{name[:32]:32} {axes[:30]:30} " + " ".join(
                f"{figures.get(m, float('nan')):12.4f}" for m in methods
            )
            ev = figures.get("events", float("nan"))
            line += "".join(f" {figures.get(m, float('nan')) / ev:11.3f}" for m in methods[1:])
            print(line, flush=True)
            rows.append(
                {
                    "definition": name,
                    "uuid": trace.workload.uuid,
                    "axes": trace.workload.axes,
                    "ms": figures,
                }
            )
            inputs = None
            torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps({"methods": methods, "rows": rows}, indent=1))
    if not rows:
        print("error: nothing timed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
