"""Our references against the organizers' on a GPU, and the roofline floor of every workload.

For each contest definition of the embedded dataset it
1. times our reference and the official one (executed from the contest's definition file) on a
   few workloads (the cheapest, a middle one and the dearest shape, within a time budget) and
   prints the ratio: speedups measured against our reference are only comparable with the
   organizers' if the two take the same time;
2. writes the roofline floor of every workload on the detected GPU to ``roofline.csv`` and
   prints a per-definition summary.

Timing: CUDA events around whole calls (the references are Python loops of small kernels, so
launch overhead is part of their cost), after one warm-up call, median of the timed calls.

Run: ``python benchmarks/bench_references.py [--official DIR] [--out DIR] [--budget-s 120]``
(``--device cpu`` for a smoke run on the quick workloads without MoE; ``--quick``: one workload of
the GDN decode definition, on the CPU when there is no GPU).
``--official`` is the folder holding the contest's ``definitions/``; the default is the
``shared/mlsys26`` folder beside the repository. Without it only our reference is timed.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from fib_core.bench.evaluation.inputs import generate_inputs
from fib_core.data.traceset import TraceSet
from fib_core.dataset import embedded_dataset_path
from fib_core.dataset.references import load_reference
from fib_core.dataset.roofline import GPU_PEAKS, detect_gpu_peak, roofline_floor_ms, workload_cost

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OFFICIAL = REPO.parent / "shared" / "mlsys26"


def load_official(root: Path | None, op_type: str, name: str) -> Any:
    if root is None:
        return None
    path = root / "definitions" / op_type / f"{name}.json"
    if not path.is_file():
        return None
    namespace: dict[str, Any] = {}
    exec(compile(json.loads(path.read_text())["reference"], str(path), "exec"), namespace)
    return namespace["run"]


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_call(fn: Any, inputs: list, iterations: int, device: str, slow_s: float = 2.0) -> float:
    """Median milliseconds of up to ``iterations`` calls after one warm-up call (fewer, but at
    least two, when one call takes long enough that ``iterations`` of them exceed ``slow_s``).
    CUDA events on a GPU, the wall clock on a CPU."""
    _sync(device)
    warm = time.perf_counter()
    fn(*inputs)
    _sync(device)
    warm = time.perf_counter() - warm
    iterations = max(2, min(iterations, int(slow_s / max(warm, 1e-6))))
    samples = []
    for _ in range(iterations):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*inputs)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
        else:
            begin = time.perf_counter()
            fn(*inputs)
            samples.append((time.perf_counter() - begin) * 1e3)
    return statistics.median(samples)


def pick_timed(name: str, traces: list, count: int, peak: Any) -> list:
    """Cheapest, middle and dearest distinct shapes (by roofline floor)."""
    by_shape: dict[tuple, Any] = {}
    for trace in traces:
        by_shape.setdefault(tuple(sorted(trace.workload.axes.items())), trace)
    ranked = sorted(by_shape.values(), key=lambda t: roofline_floor_ms(workload_cost(name, t.workload.axes), peak).ms)
    if len(ranked) <= count:
        return ranked
    positions = sorted({round(i * (len(ranked) - 1) / max(1, count - 1)) for i in range(count)})
    return [ranked[p] for p in positions]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official", type=Path, default=DEFAULT_OFFICIAL)
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--timed", type=int, default=3, help="workloads timed per definition")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=120.0, help="stop timing after this")
    parser.add_argument("--definitions", nargs="*", default=None)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: a smoke run on the quick workloads, MoE left out (too big)")
    parser.add_argument("--quick", action="store_true",
                        help="one GDN decode workload, two timed calls (CPU when no GPU)")
    args = parser.parse_args(argv)
    if args.quick:
        args.definitions = args.definitions or ["gdn_decode_qk4_v8_d128_k_last"]
        args.timed, args.iterations = 1, 2
        if not torch.cuda.is_available():
            args.device = "cpu"

    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA GPU; pass --device cpu for a smoke run", file=sys.stderr)
        return 2
    device_name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    peak = detect_gpu_peak(device_name) or GPU_PEAKS["H100 SXM"]
    official_root = args.official if args.official.is_dir() else None
    print(f"device: {device_name}; roofline peaks: {peak.name} ({peak.bandwidth_gbs:.0f} GB/s, "
          f"{peak.bf16_tflops:.0f} bf16 / {peak.fp8_tflops:.0f} fp8 TFLOP/s dense)")
    print(f"torch {torch.__version__}; official references: {'yes' if official_root else 'no'}")

    root = embedded_dataset_path()
    ts = TraceSet.from_path(root)
    names = args.definitions or sorted(ts.definitions)
    if device == "cpu":
        names = [n for n in names if not n.startswith("moe_")]
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    floors_path = args.out / "roofline.csv"
    with floors_path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["definition", "uuid", "axes", "bytes", "flops", "floor_ms", "bound"])
        summary = []
        for name in names:
            floors = []
            for trace in ts.workloads[name]:
                cost = workload_cost(name, trace.workload.axes)
                floor = roofline_floor_ms(cost, peak)
                floors.append(floor.ms)
                writer.writerow([name, trace.workload.uuid, json.dumps(trace.workload.axes),
                                 cost.bytes, cost.flops, f"{floor.ms:.6f}", floor.bound])
            summary.append((name, len(floors), min(floors), statistics.median(floors), max(floors)))
    print(f"\nroofline floors on {peak.name} (ms; every workload in {floors_path.name}):")
    print(f"{'definition':62} {'n':>4} {'min':>9} {'median':>9} {'max':>9}")
    for name, n, lo, mid, hi in summary:
        print(f"{name:62} {n:4d} {lo:9.4f} {mid:9.4f} {hi:9.4f}")

    rows = []
    print(f"\n{'definition':40} {'axes':44} {'ours ms':>9} {'official':>9} {'ratio':>6} {'floor ms':>9}")
    for name in names:
        definition = ts.definitions[name]
        ours = load_reference(name)["run"]
        theirs = load_official(official_root, definition.op_type, name)
        candidates = ts.workloads[name]
        if device == "cpu":
            candidates = [t for t in candidates if t.workload.extra.get("tags")]
        for trace in pick_timed(name, candidates, args.timed, peak):
            if time.monotonic() - started > args.budget_s:
                print(f"(time budget of {args.budget_s:.0f} s spent: stopping)")
                break
            workload = trace.workload
            inputs = generate_inputs(definition, workload, seed=0, device=device, dataset_root=root)
            floor = roofline_floor_ms(workload_cost(name, workload.axes, _named(definition, inputs)), peak)
            t_ours = time_call(ours, inputs, args.iterations, device)
            t_theirs = time_call(theirs, inputs, args.iterations, device) if theirs else float("nan")
            ratio = t_ours / t_theirs if theirs else float("nan")
            rows.append({"definition": name, "uuid": workload.uuid, "axes": workload.axes,
                         "ours_ms": t_ours, "official_ms": t_theirs, "ratio": ratio,
                         "floor_ms": floor.ms, "bound": floor.bound})
            axes = ",".join(f"{k}={v}" for k, v in workload.axes.items())
            print(f"{name[:40]:40} {axes[:44]:44} {t_ours:9.3f} {t_theirs:9.3f} {ratio:6.2f} "
                  f"{floor.ms:9.5f}", flush=True)
            del inputs
            if device == "cuda":
                torch.cuda.empty_cache()
    (args.out / "reference_timings.json").write_text(json.dumps(
        {"device": device_name, "peak": peak.name, "torch": torch.__version__, "rows": rows}, indent=1))
    outside = [r for r in rows if r["official_ms"] == r["official_ms"] and abs(r["ratio"] - 1) > 0.2]
    print(f"\n{len(rows)} timed; {len(outside)} outside 20% of the official reference")
    return 0 if rows else 1


def _named(definition: Any, inputs: list) -> dict[str, Any]:
    """Inputs by name, so the cost model can use the actual indices, lengths and routing."""
    return dict(zip(definition.inputs, inputs, strict=True))


if __name__ == "__main__":
    sys.exit(main())
