"""Launch-parameter and work-dtype sweep of the GDN prefill starter (needs a CUDA GPU).

For a few real prefill shapes it times the whole call (triton.testing.do_bench: L2 flushed,
median) and each of the three stages (torch profiler, mean of 10 calls) under the default
``LaunchConfig`` and under variants of it, and checks every variant against the naive
token-by-token recurrence (organizers' rule, atol = rtol = 1e-2) with its largest errors. It
also prints registers and spills of the compiled default kernels.

    python benchmarks/tune_gdn_prefill.py                   # default shapes and variants
    python benchmarks/tune_gdn_prefill.py --shapes 5709:2 8192:32
    python benchmarks/tune_gdn_prefill.py --once 8192:32    # one default call (for ncu)
    python benchmarks/tune_gdn_prefill.py --quick           # one shape (CPU: inputs, exit 3)
    python benchmarks/tune_gdn_prefill.py --workloads --starter OLD/triton
                                        # every embedded workload (its own cu_seqlens), kit
                                        # timer, this starter beside an older copy of its
                                        # triton/ folder

``--workloads`` times the default call on each of the definition's 100 workloads, split into
sequences as the kit's embedded dataset splits them (its own cu_seqlens; seeded inputs), under the
kit's timer (the judge's span, as ``run_local.py`` reports), the two starters taking turns
going first; it checks no outputs (the GPU tests in tests/starters/test_gdn.py do) and prints
the means by group of calls. A starter whose call raises is named with the error and timed
no further.

The table is also written to $OUT/tune_gdn_prefill.txt (``--workloads``:
$OUT/tune_gdn_prefill_workloads.txt) when $OUT is set.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_gdn  # noqa: E402  (the test helpers and timing of the main GDN benchmark)
from bench_common import needs_gpu  # noqa: E402

H = bench_gdn.H
SHAPES = [(61, 1), (139, 3), (2107, 1), (5709, 2), (8192, 32), (8192, 57)]
BF16 = torch.bfloat16

# Each variant is a set of LaunchConfig fields replaced on top of the default for the shape.
VARIANTS: list[dict] = [
    {"scan_dot_bf16": False, "w_dtype": torch.float32, "h_dtype": torch.float32},
    {"scan_stages": 2},
    {"scan_block_v": 16},
    {"scan_block_v": 32},
    {"prep_warps": 8},
    {"prep_maxnreg": None},
    {"scan_longest_first": False},
    {"prep_stages": 1},
    {"out_block_v": 128},
    {"fused": True},
    {"fused": False},
    {"fused_warps": 8},
    {"token_scan": False},
]


def parse_shape(text: str) -> tuple[int, int]:
    total, n = text.split(":")
    return int(total), int(n)


def stage_us(call) -> dict[str, float]:
    """Mean device time per call of each kernel, from the torch profiler (10 calls)."""
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            call()
        torch.cuda.synchronize()
    out = {}
    for evt in prof.key_averages():
        total = getattr(evt, "device_time_total", None) or getattr(evt, "cuda_time_total", 0)
        for stage in ("prep", "scan", "output", "fused", "token_scan"):
            if evt.key.startswith(f"{stage}_kernel") or evt.key.startswith(f"gdn_prefill_{stage}"):
                if evt.count:
                    out[stage] = total / 10
    return out


def compiled_info(kernel) -> str:
    """Registers, spills and shared memory of every compiled variant of a Triton kernel."""
    parts = []
    try:
        for cache in kernel.device_caches.values():
            for compiled in cache[0].values():
                md = compiled.metadata
                parts.append(f"regs={compiled.n_regs} spills={compiled.n_spills} "
                             f"warps={md.num_warps} stages={md.num_stages} smem={md.shared}")
    except Exception as err:  # the cache layout differs between Triton versions
        parts.append(f"n/a ({type(err).__name__})")
    return "; ".join(parts[-3:])


def label(kw: dict) -> str:
    if not kw:
        return "default"
    short = {BF16: "bf16", torch.float32: "fp32"}
    return ",".join(f"{k}={short.get(v, v)}" for k, v in kw.items())


# Groups of calls by total tokens (label, first, last): the token path, the one-launch kernel
# on short prompts, the mid-size calls, and the longest prompts.
GROUPS = (("T <= 64", 0, 64), ("T = 65..600", 65, 600), ("T = 601..8191", 601, 8191),
          ("T >= 8192", 8192, 1 << 40))


COPY_PACKAGE = "gdn_prefill_starter_copy"


def workload_starters(copy: Path | None) -> dict:
    """The kit's starter, and with ``copy`` that copy of a triton/ folder too, loaded under its
    own package name (a copy's folders may be named as the kit's are)."""
    starters = {"current": H.load_triton_starter(H.PREFILL_DIR / "triton")}
    if copy is not None:
        starters["--starter"] = H.load_triton_starter(copy, COPY_PACKAGE)
    return starters


def workload_inputs(record: dict, device: str = "cuda") -> list:
    """Seeded inputs of one embedded workload, cut into sequences by the dataset's own
    ``cu_seqlens`` (skewed lengths: the longest sequence sets stage 2's time)."""
    from fib_core.dataset import embedded

    workload = record["workload"]
    cu = embedded.blob_tensors(H.PREFILL, workload["axes"], workload["uuid"])["cu_seqlens"]
    lengths = (cu[1:] - cu[:-1]).tolist()
    return H.prefill_inputs(lengths, seed=int(cu[-1]) + len(lengths), device=device)


def time_workloads(starters: dict, lines) -> None:
    """Kit-timer latency of each starter on every embedded workload, then group means.
    The starters take turns going first; one that raises is reported and dropped."""
    from fib_core.dataset import embedded

    records = embedded.workload_records(H.PREFILL)
    names = list(starters)
    times: dict[str, list[tuple[int, float]]] = {name: [] for name in names}
    failed: dict[str, str] = {}
    lines.append(f"{'workload':>8} {'T':>5} {'N':>3} " + " ".join(f"{n:>10}" for n in names))
    for i, record in enumerate(records):
        axes = record["workload"]["axes"]
        total, n = axes["total_seq_len"], axes["num_seqs"]
        inputs = workload_inputs(record)
        got: dict[str, str] = {}
        for name in names if i % 2 == 0 else names[::-1]:
            if name in failed:
                got[name] = f"{'failed':>10}"
                continue
            try:
                call, _ = bench_gdn.dps(starters[name].run, inputs, True)
                us = bench_gdn.kit_us(call)
            except Exception as err:  # a broken copy: say so, time the others on
                failed[name] = f"{name} failed at T={total} N={n}: {type(err).__name__}: {err}"
                got[name] = f"{'failed':>10}"
                continue
            times[name].append((total, us))
            got[name] = f"{us:10.1f}"
        lines.append(f"{i:8d} {total:5d} {n:3d} " + " ".join(got[name] for name in names))
    lines.extend(failed.values())
    ok = [name for name in names if name not in failed]
    if not ok:
        return
    for label, first, last in GROUPS:
        picked = [i for i, (t, _) in enumerate(times[ok[0]]) if first <= t <= last]
        means = [f"{statistics.mean(times[name][i][1] for i in picked):10.1f}" if picked
                 else f"{'-':>10}" for name in ok]
        lines.append(f"{label:>14} n={len(picked):<3d} " + " ".join(means))
    lines.append(f"{'all':>14} n={len(records):<3d} " + " ".join(
        f"{statistics.mean(us for _, us in times[name]):10.1f}" for name in ok))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="*", type=parse_shape,
                        help="TOTAL:NUM_SEQS pairs (default: a few real shapes)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", type=parse_shape, help="run one default call and exit")
    mode.add_argument("--quick", action="store_true", help="one shape (139:3)")
    mode.add_argument("--workloads", action="store_true",
                      help="every embedded workload, cut by its own cu_seqlens, under the "
                      "kit's timer")
    parser.add_argument("--starter", type=Path,
                        help="with --workloads: also time this copy of the starter's triton/ folder")
    args = parser.parse_args()
    if args.starter and not (args.starter / "kernel.py").is_file():
        parser.error(f"--starter {args.starter}: no kernel.py there; pass a copy of the "
                     "starter's triton/ folder")
    if args.starter and not args.workloads:
        parser.error("--starter goes with --workloads")
    if args.shapes is not None and (args.workloads or args.once or args.quick):
        parser.error("--shapes goes with the sweep, not with --workloads, --once or --quick")
    args.shapes = args.shapes or SHAPES
    if args.quick:
        args.shapes = [(139, 3)]
    if not torch.cuda.is_available():
        if not args.quick:
            return needs_gpu("tune_gdn_prefill.py", "--quick builds one input set on a CPU")
        inputs = bench_gdn.prefill_shape_inputs(*args.shapes[0], device="cpu")
        return needs_gpu("tune_gdn_prefill.py", f"prefill 139:3: {len(inputs)} inputs built")
    if args.workloads:
        lines = bench_gdn.Lines()
        lines.append(f"device: {torch.cuda.get_device_name()}; kit timer, us")
        time_workloads(workload_starters(args.starter), lines)
        out_dir = os.environ.get("OUT")
        if out_dir:
            Path(out_dir, "tune_gdn_prefill_workloads.txt").write_text("\n".join(lines) + "\n")
        return 0

    mod = H.load_triton_starter(H.PREFILL_DIR / "triton")
    base = mod.launch_config
    if args.once:
        inputs = bench_gdn.prefill_shape_inputs(*args.once)
        call, _ = bench_gdn.dps(mod.run, inputs, True)
        for _ in range(4):
            call()
        torch.cuda.synchronize()
        return 0

    lines = bench_gdn.Lines()
    lines.append(f"device: {torch.cuda.get_device_name()}")
    for total, n in args.shapes:
        inputs = bench_gdn.prefill_shape_inputs(total, n)
        want = H.naive_prefill(*inputs)
        default = base(total, n, inputs[2].shape[1], inputs[2].shape[2])
        lines.append(f"T={total} N={n} default {default}")
        for kw in [{}, *VARIANTS]:
            cfg = dataclasses.replace(default, **kw)
            if kw and cfg == default:
                continue
            mod.launch_config = lambda *_, cfg=cfg: cfg
            try:
                call, outs = bench_gdn.dps(mod.run, inputs, True)
                call()
                torch.cuda.synchronize()
                errs = [(o.float() - w.float()).abs().max().item() for o, w in zip(outs, want, strict=True)]
                ok = bench_gdn.verdict(outs, want)
                us = bench_gdn.bench_us(call)
                st = stage_us(call)
                stages = " ".join(f"{k}={v:6.1f}" for k, v in st.items())
                lines.append(f"  {label(kw):58s} {us:7.1f}us  {stages}  "
                             f"err o={errs[0]:.1e} s={errs[1]:.1e} {ok[:60]}")
            except Exception as err:  # out of resources for a large block, etc.
                lines.append(f"  {label(kw):58s} {type(err).__name__}: {str(err)[:100]}")
            finally:
                mod.launch_config = base
        for name in ("token_scan_kernel", "gdn_prefill_fused_kernel", "prep_kernel", "scan_kernel",
                     "output_kernel"):
            lines.append(f"  {name}: {compiled_info(getattr(mod, name))}")

    out_dir = os.environ.get("OUT")
    if out_dir:
        Path(out_dir, "tune_gdn_prefill.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
