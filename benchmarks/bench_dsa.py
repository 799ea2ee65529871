"""Latency of the two DSA Triton starters on this GPU, per real workload, against our references.

    python benchmarks/bench_dsa.py                 # every real shape of both definitions
    python benchmarks/bench_dsa.py --quick         # 5 attention + 12 indexer shapes
    python benchmarks/bench_dsa.py --sweep         # also try other tile / split settings

For each workload: the output is checked first (attention: the organizers' atol = rtol = 1e-2;
indexer: ids reachable, unique, the right count, and the sorted chosen scores equal to the
reference's), and no speedup is printed for a failing one. Then both sides are timed with
triton.testing.do_bench (L2 flushed before every call, median; CUDA events, so a few us of
launch overhead are included); "kern ms" is the kit's own timer (``fib_core.bench.evaluation.timers``,
judge's span from the first kernel's start to the last one's end, gaps included, L2 flushed),
the figure ``run_local.py`` reports. %roof uses the do_bench figure against the kit's roofline:
the cost model of ``fib_core.dataset.roofline`` on the actual inputs (valid sparse indices,
sequence lengths) and the datasheet peaks of the report's table. Inputs: attention rows select
2048 distinct random cache tokens (the last token of a batch has a 1500-token context, padded);
indexer lengths are random with one request filling ``max_num_pages``.
On a CPU, ``--quick`` builds one input set of each definition and its cost, then exits 3.
Writes the table to $OUT/bench_dsa.txt and $OUT/bench_dsa.json when OUT is set.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType

import torch
import triton
from bench_common import needs_gpu

from fib_core.bench.evaluation.timers import measure
from fib_core.dataset.roofline import (
    GPU_PEAKS,
    Cost,
    GpuPeak,
    detect_gpu_peak,
    roofline_floor_ms,
    workload_cost,
)

REPO = Path(__file__).resolve().parents[1]

def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# The test module owns the input makers, the real shape lists and the checks.
T = _load(REPO / "tests" / "starters" / "test_dsa.py", "_dsa_test_helpers")


def gpu_peak() -> GpuPeak:
    """The report's datasheet peaks for this GPU (H100 SXM's when it is not in the table)."""
    return detect_gpu_peak(torch.cuda.get_device_name()) or GPU_PEAKS["H100 SXM"]


def time_ms(fn, rep_ms: int = 100) -> float:
    return float(triton.testing.do_bench(fn, warmup=25, rep=rep_ms, return_mode="median"))


def kernel_ms(fn, iters: int = 30) -> float:
    """The kit's latency of ``fn``: the judge's span per call, L2 flushed, median of one trial."""
    return measure(lambda i: fn(), lambda i: None, device="cuda", method="profiler", warmup=3,
                   iterations=iters, trials=1).latency_ms


def kit_cost(kind: str, inputs: list) -> Cost:
    """The kit's cost model on these inputs (what the report's roofline column uses)."""
    if kind == "attention":
        axes = {"num_tokens": inputs[0].shape[0]}
        return workload_cost(T.ATTN, axes, {"sparse_indices": inputs[4]})
    batch, max_pages = inputs[4].shape  # block table
    axes = {"batch_size": batch, "max_num_pages": max_pages}
    return workload_cost(T.INDEXER, axes, {"seq_lens": inputs[3]})


def make_inputs(kind: str, shape: tuple, device: str) -> tuple[list, list]:
    """(inputs, outputs) of one shape, as the tests make them."""
    if kind == "attention":
        n = shape[0]
        valid = [2048] * n
        if n > 1:
            valid[-1] = 1500
        inputs = T.make_attention_inputs(n, valid=valid, seed=n, device=device)
        return inputs, T.attention_outputs(inputs)
    b, mp = shape
    inputs = T.make_indexer_inputs(b, mp, seed=b * 100 + mp, device=device)
    return inputs, [torch.full((b, 2048), 12345, dtype=torch.int32, device=device)]


def bench_one(kind: str, shape: tuple, reference, with_reference: bool, knobs: dict) -> dict:
    inputs, outputs = make_inputs(kind, shape, "cuda")
    starter = T.attention_starter() if kind == "attention" else T.indexer_starter()
    cost = kit_cost(kind, inputs)

    def call() -> None:
        starter.run(*inputs, *outputs, **knobs)

    row: dict = {"kind": kind, "shape": list(shape), "knobs": knobs}
    try:
        call()
        torch.cuda.synchronize()
        want = reference(*inputs)
        if kind == "attention":
            T.assert_close("output", outputs[0], want[0])
            T.assert_close("lse", outputs[1], want[1])
        else:
            T.check_topk(outputs[0], inputs, want)
        row["ok"] = True
    except Exception as exc:  # report and keep going: one failure must not hide the rest
        row.update(ok=False, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        return row
    row["ms"] = time_ms(call)
    row["kernel_ms"] = kernel_ms(call) if with_reference else None
    if with_reference:
        row["ref_ms"] = time_ms(lambda: reference(*inputs), rep_ms=100)
        row["speedup"] = row["ref_ms"] / row["ms"]
    floor_ms = roofline_floor_ms(cost, gpu_peak()).ms
    row.update(gbs=cost.achieved_gbs(row["ms"]), tflops=cost.achieved_tflops(row["ms"]),
               roofline_pct=100.0 * floor_ms / row["ms"], floor_ms=floor_ms)
    return row


def format_table(rows: list[dict], device: str) -> str:
    lines = [f"DSA starters on {device} (do_bench median, L2 flushed)",
             f"{'definition':10} {'shape':>9} {'ms':>8} {'kern ms':>8} {'ref ms':>9} "
             f"{'speedup':>8} {'GB/s':>7} {'TFLOP/s':>8} {'%roof':>6}"]
    for r in rows:
        shape = "x".join(str(s) for s in r["shape"])
        if not r["ok"]:
            lines.append(f"{r['kind']:10} {shape:>9}  FAILED {r['error']}")
            continue
        ref = f"{r['ref_ms']:9.3f}" if "ref_ms" in r else f"{'-':>9}"
        spd = f"{r['speedup']:8.1f}" if "speedup" in r else f"{'-':>8}"
        kern = f"{r['kernel_ms']:8.4f}" if r.get("kernel_ms") else f"{'-':>8}"
        lines.append(f"{r['kind']:10} {shape:>9} {r['ms']:8.4f} {kern} {ref} {spd} "
                     f"{r['gbs']:7.0f} {r['tflops']:8.1f} {r['roofline_pct']:6.1f}")
    for kind in ("attention", "indexer"):
        ok = [r for r in rows if r["kind"] == kind and r["ok"] and "speedup" in r]
        if ok:
            mean = sum(r["speedup"] for r in ok) / len(ok)
            roof = sum(r["roofline_pct"] for r in ok) / len(ok)
            failed = sum(1 for r in rows if r["kind"] == kind and not r["ok"])
            lines.append(f"{kind}: {len(ok)} passed, {failed} failed, mean speedup {mean:.1f}x, "
                         f"mean {roof:.1f}% of roofline")
    return "\n".join(lines)


SWEEPS = {
    "attention": [dict(block_k=bk, num_warps=w, num_stages=st, num_splits=sp)
                  for bk in (32, 64) for w in (4, 8) for st in (1, 3) for sp in (16, 32, 64)],
    "indexer": [dict(num_warps=w, compact_cols=c) for w in (4, 8) for c in (0, 128)],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a subset of the shapes")
    parser.add_argument("--sweep", action="store_true", help="also time other kernel settings")
    parser.add_argument("--only", choices=("attention", "indexer"), help="one definition")
    parser.add_argument("--budget-s", type=float, default=240.0, help="stop timing after this")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        if not args.quick:
            return needs_gpu("bench_dsa.py", "--quick builds the inputs on a CPU")
        done = []
        for kind, shape in (("attention", (1,)), ("indexer", (1, 3))):
            inputs, _ = make_inputs(kind, shape, "cpu")
            cost = kit_cost(kind, inputs)
            done.append(f"{kind} {shape}: {cost.bytes} B, {cost.flops} flop")
        return needs_gpu("bench_dsa.py", "; ".join(done))

    attn_shapes = [(n,) for n in T.ATTN_NUM_TOKENS]
    idx_shapes = list(T.INDEXER_REAL)
    if args.quick:
        idx_shapes = idx_shapes[:: max(1, len(idx_shapes) // 12)]
    plan = []
    if args.only in (None, "attention"):
        plan += [("attention", s) for s in attn_shapes]
    if args.only in (None, "indexer"):
        plan += [("indexer", s) for s in idx_shapes]

    refs = {"attention": T.reference(T.ATTN).run, "indexer": T.reference(T.INDEXER).run}
    device = torch.cuda.get_device_name()
    deadline = time.monotonic() + args.budget_s
    rows = []
    for kind, shape in plan:
        if time.monotonic() > deadline:
            print(f"budget spent: skipping the remaining {kind} shapes", flush=True)
            break
        rows.append(bench_one(kind, shape, refs[kind], True, {}))
        r = rows[-1]
        print(f"{kind} {shape}: " + (f"{r['ms']:.4f} ms, {r['roofline_pct']:.0f}% roof"
                                     if r["ok"] else r["error"]), flush=True)

    text = format_table(rows, device)
    if args.sweep:
        text += "\n\n" + sweep(args.only, refs)
    print("\n" + text)
    out = os.environ.get("OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "bench_dsa.txt").write_text(text + "\n", encoding="utf-8")
        (Path(out) / "bench_dsa.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0 if rows else 1


def sweep(only: str | None, refs: dict) -> str:
    """Time alternative settings on a few representative shapes (correctness checked too)."""
    lines = ["settings sweep (ms; x = failed)"]
    targets = {"attention": [(n,) for n in T.ATTN_NUM_TOKENS],
               "indexer": [(1, 3), (8, 32), (15, 82), (30, 91)]}
    for kind, shapes in targets.items():
        if only not in (None, kind):
            continue
        for knobs in SWEEPS[kind]:
            cells = []
            for shape in shapes:
                r = bench_one(kind, shape, refs[kind], False, knobs)
                cells.append(f"{r['ms']:.4f}" if r["ok"] else "x")
            lines.append(f"{kind:10} {json.dumps(knobs):60} " + " ".join(f"{c:>8}" for c in cells))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
