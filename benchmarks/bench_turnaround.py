"""Turnaround per definition: first run (cold caches) and warm re-run wall time, GPU share.

    python benchmarks/bench_turnaround.py                         # every definition, its starter
    python benchmarks/bench_turnaround.py --defs gdn_decode_qk4_v8_d128_k_last --gpus 0,1
    python benchmarks/bench_turnaround.py --quick                 # CPU, seconds: the harness path
    python benchmarks/bench_turnaround.py --quick --timeline      # where each process's start goes
    python benchmarks/bench_turnaround.py --defs gdn_decode_qk4_v8_d128_k_last --watch-idle 5

Each definition's default starter runs through the same flow as ``run_local.py`` (settings
from the definition's evaluation-settings file), twice: first with a fresh ``FIB_CACHE_DIR``
(builds, the solution's Triton kernels, embedded dataset, reference outputs and latency all
computed), then again with that cache warm. Printed per definition: workloads, cold and warm wall time, the GPU time the
solution's timed calls account for (latency x calls), the harness's share of the warm run,
and the warm run's per-phase breakdown; each run's own line gives its start-up (until the
first workload starts) and wind-down (from the last workload's end until the run returns).

``--quick`` runs on the CPU in seconds: the definition's own reference packed as a Python
solution, on one quick workload, so the cache and phase accounting are exercised anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_common import starter_fork  # noqa: E402

from fib_core.bench.evaluation.phases import format_breakdown, harness_breakdown  # noqa: E402

QUICK_DEF = "gdn_decode_qk4_v8_d128_k_last"
# Targets: warm GDN decode <= 15 s, cold GDN prefill <= 300 s, every warm re-run <= 60 s.
TARGETS = {
    "gdn_decode_qk4_v8_d128_k_last": (None, 15.0),
    "gdn_prefill_qk4_v8_d128_k_last": (300.0, 60.0),
}
DEFAULT_WARM_TARGET = 60.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--defs", nargs="+", metavar="DEF", help="definitions (default: all five)")
    p.add_argument("--gpus", help="GPUs to spread over, e.g. 0,1 (default: every visible one)")
    p.add_argument("--workloads", nargs="+", metavar="FILTER", help="workload filters")
    p.add_argument(
        "--quick",
        action="store_true",
        help="CPU, the reference as the solution, one workload: seconds",
    )
    p.add_argument(
        "--cache",
        type=Path,
        help="keep the cache in this folder (default: a fresh temporary one, removed after)",
    )
    p.add_argument(
        "--warm-only",
        action="store_true",
        help="with --cache already filled by an earlier run: skip the first (cold) run",
    )
    p.add_argument(
        "--profile-workers",
        type=Path,
        metavar="DIR",
        help="run the warm run's worker and judge under cProfile (stats in DIR) and print "
        "where their time went",
    )
    p.add_argument(
        "--timeline",
        action="store_true",
        help="print each run's processes' milestones (boot, imports, ready, first task) on "
        "one clock, relative to the run's start",
    )
    p.add_argument(
        "--watch-idle",
        type=float,
        default=0.0,
        metavar="S",
        help="time the warm run as run_local.py --watch's run after an edit: its processes "
        "are started S seconds before the clock starts (default 0: a fresh command)",
    )
    p.add_argument("--json", type=Path, help="write the figures here")
    return p.parse_args(argv)


def _progress(label: str, started: float, marks: dict[str, float]):
    """A line per finished workload (a long run shows where it is, and a killed one what it
    reached); ``marks`` gets the times of the first workload's start and the last one's end."""
    from fib_core.bench.events import WorkloadFinished, WorkloadStarted

    def show(event: Any) -> None:
        if isinstance(event, WorkloadStarted):
            marks.setdefault("first_start", time.perf_counter() - started)
        if isinstance(event, WorkloadFinished):
            marks["last_end"] = time.perf_counter() - started
            marks.setdefault("first_end", marks["last_end"])
            marks[f"end:{event.trace.workload.uuid}"] = marks["last_end"]
            ev = event.trace.evaluation
            status = ev.status.value if ev is not None else "NONE"
            phases = (ev.extra or {}).get("phase_seconds", {}) if ev is not None else {}
            spent = " ".join(f"{k}={v:.2f}" for k, v in phases.items() if v >= 0.01)
            print(f"  [{label}] {event.index + 1}/{event.total} {status} "
                  f"t={time.perf_counter() - started:.1f}s {event.trace.workload.uuid[:8]} "
                  f"{spent}", flush=True)

    return show


def _mark_handover(started: float, marks: dict[str, float]) -> Any:
    """Record in ``marks["handover"]`` when the launcher hands its work over (one GPU: the
    in-process run starts; several: the requests go to the GPU processes), so a run's
    start-up splits into the launcher's part and the part after it. Returns the undo."""
    from fib_core.bench.engine import gpu_processes, gpus

    real_execute, real_run = gpus.execute, gpu_processes.ShardProcesses.run

    def execute(*args: Any, **kwargs: Any) -> Any:
        marks.setdefault("handover", time.perf_counter() - started)
        return real_execute(*args, **kwargs)

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        marks.setdefault("handover", time.perf_counter() - started)
        return real_run(self, *args, **kwargs)

    # gpus.execute: what the engine's fan-out runs in this process on one GPU
    gpus.execute, gpu_processes.ShardProcesses.run = execute, run

    def undo() -> None:
        gpus.execute, gpu_processes.ShardProcesses.run = real_execute, real_run

    return undo


def _run(cfg: Any, opts: Any, gpus: str | None, cache: Path, extra: dict | None,
         label: str = "run", idle: float = 0.0) -> dict:
    """One run through the run_local flow with FIB_CACHE_DIR=cache; wall time and traces.

    Triton's cache goes in there too (``TRITON_CACHE_DIR``), so a first run compiles the
    solution's kernels as on a fresh machine, or after an edit to them. ``idle``: the run's
    processes are started that many seconds before the clock starts, as ``run_local.py
    --watch`` starts them while it waits for an edit (packing and the dataset still count)."""
    from fib_core.bench.engine.gpus import start_early
    from fib_core.project.pack import pack_solution
    from fib_core.project.run_finish import merge_shards
    from fib_core.project.runflow import execute_on_gpus, make_request
    from fib_core.project.workspace import resolve_dataset

    os.environ["FIB_CACHE_DIR"] = str(cache)
    os.environ["TRITON_CACHE_DIR"] = str(cache / "triton")
    since = time.monotonic()  # the processes' milestones are on this clock (--timeline)
    started = time.perf_counter()
    dataset = resolve_dataset()[0]
    start_early(opts.flags.get("device"), gpus, dataset)  # as run_local does
    if idle:  # as in a watch after its first run: this process has imported torch and the engine
        from fib_core.bench.engine.gpu_processes import preload_engine

        preload_engine()
        time.sleep(idle)
        since, started = time.monotonic(), time.perf_counter()
        label += f", processes started {idle:g} s before"
    request = make_request(cfg, pack_solution(cfg), opts)
    request.dataset_path = str(dataset)
    if extra:
        request.engine["extra"] = dict(extra)
    marks: dict[str, float] = {}
    handed = _mark_handover(started, marks)
    try:
        shards = execute_on_gpus(request, gpus, on_event=_progress(label, started, marks))
    finally:
        handed()
    wall = time.perf_counter() - started
    # Start-up: until the first workload starts (processes, imports, dataset); wind-down: from
    # the last workload's end until the run returns (stopping the processes, merging).
    print(f"  [{label}] {cfg.solution.definition}: {wall:.1f} s (start-up "
          f"{marks.get('first_start', float('nan')):.1f} s, wind-down "
          f"{wall - marks.get('last_end', float('nan')):.1f} s; the launcher handed the work "
          f"over at {marks.get('handover', float('nan')):.1f} s)", flush=True)
    if len(shards) > 1:  # where each GPU's share ended: an uneven spread shows here
        ends = [max((marks.get(f"end:{t.workload.uuid}", float("nan")) for t in s.traces),
                    default=float("nan")) for s in shards]
        print(f"  [{label}] last workload per GPU: "
              + ", ".join(f"GPU {s.shard} {len(s.traces)} at {e:.1f} s"
                          for s, e in zip(shards, ends, strict=True)), flush=True)
    _print_timeline(since, marks)
    traces, _ = merge_shards(shards)
    return {"wall_s": wall, "traces": traces, "breakdown": harness_breakdown(traces),
            "gpus": len(shards), "device": shards[0].device}


def _print_timeline(since: float, marks: dict[str, float]) -> None:
    """With --timeline: each process's milestones in this run (seconds after its start), then
    the file is emptied for the next run."""
    from fib_core.bench.evaluation.timeline import TIMELINE_VAR, format_timeline, read

    path = os.environ.get(TIMELINE_VAR)
    if not path:
        return
    print(f"    timeline (s after the run's start; first workload started "
          f"{marks.get('first_start', float('nan')):.2f}, ended "
          f"{marks.get('first_end', float('nan')):.2f}):")
    for line in format_timeline(read(path, since)):
        print("    " + line)
    Path(path).write_text("")


def _print_profiles(folder: Path, top: int = 25) -> None:
    """The heaviest functions (cumulative time) of each profiled worker and judge."""
    import pstats

    for path in sorted(folder.glob("*.prof")):
        print(f"\n  -- {path.name} (cumulative seconds, top {top})")
        pstats.Stats(str(path)).sort_stats("cumulative").print_stats(top)


def bench_definition(definition: str, args: argparse.Namespace, scratch: Path) -> dict:
    from fib_core.project.runflow import RunOptions

    cfg = starter_fork(definition, scratch, name=f"turnaround-{definition[:24]}",
                       use_reference=args.quick)
    workloads = args.workloads
    flags = {"workloads": tuple(workloads)} if workloads else {}
    opts = RunOptions(flags={**flags, "device": "cpu"} if args.quick else flags)
    cache = (args.cache or scratch) / f"cache-{definition[:24]}"
    if args.warm_only:
        cold = {"wall_s": float("nan"), "traces": [], "breakdown": {}, "gpus": 0,
                "device": None}
    else:
        cold = _run(cfg, opts, args.gpus, cache, None, "cold")
    from fib_core.paths import PROFILE_ENV

    if args.profile_workers is not None:
        args.profile_workers.mkdir(parents=True, exist_ok=True)
        os.environ[PROFILE_ENV] = str(args.profile_workers)
    try:
        warm = _run(cfg, opts, args.gpus, cache, None, "warm", args.watch_idle)
    finally:
        os.environ.pop(PROFILE_ENV, None)
    if args.profile_workers is not None:
        _print_profiles(args.profile_workers)
    gpu_s = warm["breakdown"]["gpu_solution_s"]
    passed = sum(
        1 for t in warm["traces"] if t.evaluation and t.evaluation.status.value == "PASSED"
    )
    cold_target, warm_target = TARGETS.get(definition, (None, DEFAULT_WARM_TARGET))
    result = {
        "definition": definition,
        "workloads": len(warm["traces"]),
        "passed": passed,
        "cold_s": round(cold["wall_s"], 2),
        "warm_s": round(warm["wall_s"], 2),
        "gpu_timed_calls_s": round(gpu_s, 3),
        "gpus": warm["gpus"],
        # of the GPUs' wall time together: with several, each ran its share side by side
        "harness_share": round(1 - gpu_s / (warm["wall_s"] * warm["gpus"]), 3)
        if warm["wall_s"] else None,
        "cold_phases": {k: round(v, 2) for k, v in cold["breakdown"].items()},
        "warm_phases": {k: round(v, 2) for k, v in warm["breakdown"].items()},
        "targets": {"cold_s": cold_target, "warm_s": warm_target},
    }
    print(f"\n== {definition}: {result['workloads']} workloads, {passed} passed")
    print(
        f"  first run (cold caches) {cold['wall_s']:8.1f} s"
        + (f"   target <= {cold_target:g} s" if cold_target else "")
    )
    print(f"  warm re-run             {warm['wall_s']:8.1f} s   target <= {warm_target:g} s")
    print(
        f"  GPU in timed calls      {gpu_s:8.2f} s   harness share "
        f"{100 * (result['harness_share'] or 0):.1f} %"
    )
    if cold["traces"]:
        print("  cold " + format_breakdown(cold["breakdown"], cold["wall_s"], cold["device"],
                                       cold["gpus"])
              .replace("\n", "\n  "))
    print("  warm " + format_breakdown(warm["breakdown"], warm["wall_s"], warm["device"], warm["gpus"])
          .replace("\n", "\n  "))
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from fib_core.dataset.embedded import definition_files

    names = sorted(definition_files())
    if args.warm_only and args.cache is None:
        print("error: --warm-only needs --cache (the folder an earlier run filled)", file=sys.stderr)
        return 2
    if args.quick:
        defs = args.defs or [QUICK_DEF]
        if args.workloads is None:
            args.workloads = ["batch_size=1"] if defs == [QUICK_DEF] else None
    else:
        defs = args.defs or names
    unknown = [d for d in defs if d not in names]
    if unknown:
        print(
            f"error: unknown definition {unknown[0]}; choose from {', '.join(names)}",
            file=sys.stderr,
        )
        return 2
    keep = os.environ.get("FIB_CACHE_DIR")
    results = []
    with tempfile.TemporaryDirectory(prefix="fib-turnaround-") as tmp:
        if args.timeline:
            from fib_core.bench.evaluation.timeline import TIMELINE_VAR

            os.environ[TIMELINE_VAR] = str(Path(tmp) / "timeline.txt")
        try:
            for definition in defs:
                results.append(bench_definition(definition, args, Path(tmp)))
        finally:
            if keep is None:
                os.environ.pop("FIB_CACHE_DIR", None)
            else:
                os.environ["FIB_CACHE_DIR"] = keep
    print("\n---- turnaround ----")
    print(f"{'definition':<62} {'n':>4} {'cold s':>8} {'warm s':>8} {'GPU s':>7} {'harness':>8}")
    for r in results:
        print(
            f"{r['definition']:<62} {r['workloads']:>4} {r['cold_s']:>8.1f} {r['warm_s']:>8.1f} "
            f"{r['gpu_timed_calls_s']:>7.2f} {100 * (r['harness_share'] or 0):>7.1f}%"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
        print(f"figures written to {args.json}")
    return 0 if all(r["passed"] == r["workloads"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
