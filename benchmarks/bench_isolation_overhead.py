"""What containing a hostile solution costs per workload: judge process vs in-worker checks.

Runs the same solution over the same workloads in a persistent worker twice per round: once
the way the kit grades (outputs checked by the judge process, reference outputs and latency
there) and once with ``FIB_TRUSTED_CHECKS=1`` (the worker checks itself, as before the judge
existed). Prints the median wall time per workload of each and the difference. The first round
warms caches (builds, the reference cache) and is not counted, nor is the first workload of a
pass (it includes starting the worker and the judge).

    python benchmarks/bench_isolation_overhead.py                    # toy definition on CPU
    python benchmarks/bench_isolation_overhead.py --device cuda --fork --workloads 8
    python benchmarks/bench_isolation_overhead.py --device cuda \\
        --dataset PATH --definition NAME --solution NAME [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fib_core.bench import Benchmark, BenchmarkConfig  # noqa: E402
from fib_core.data.traceset import TraceSet  # noqa: E402

FIXTURES = ROOT / "tests" / "bench" / "fixtures"


def _toy_dataset(folder: Path) -> Path:
    import json

    sys.path.insert(0, str(ROOT / "tests" / "bench"))
    from conftest import toy_solution_dict

    (folder / "definitions").mkdir(parents=True)
    (folder / "workloads").mkdir()
    shutil.copy(FIXTURES / "toy_axpy.json", folder / "definitions" / "toy_axpy.json")
    shutil.copy(FIXTURES / "toy_axpy.jsonl", folder / "workloads" / "toy_axpy.jsonl")
    (folder / "solutions").mkdir()
    (folder / "solutions" / "correct.json").write_text(json.dumps(toy_solution_dict("correct")))
    return folder


def _load(args: argparse.Namespace, tmp: Path) -> tuple[Any, Any, list]:
    """(trace set, solution, workloads) for the chosen mode."""
    if args.fork:  # this fork's own solution on its dataset, as run_local would run it
        from fib_core.project.workspace import open_workspace

        ws = open_workspace("config.toml")
        solution = ws.pack()
        trace_set = ws.trace_set
    else:
        trace_set = TraceSet.from_path(args.dataset)
        solution = next(s for s in trace_set.solutions[args.definition] if s.name == args.solution)
    records = trace_set.workloads.get(solution.definition, [])[: args.workloads]
    return trace_set, solution, [r.workload for r in records]


def _one_pass(
    args: argparse.Namespace, tmp: Path, cfg: BenchmarkConfig, trusted: bool
) -> tuple[list[float], list[float]]:
    """(wall seconds per workload, worker harness seconds per workload) for one pass."""
    os.environ["FIB_TRUSTED_CHECKS"] = "1" if trusted else "0"
    trace_set, solution, workloads = _load(args, tmp)
    walls: list[float] = []
    harness: list[float] = []
    stamp = [time.perf_counter()]

    def on_event(event: object) -> None:
        name = type(event).__name__
        if name == "WorkloadStarted":
            stamp[0] = time.perf_counter()
        elif name == "WorkloadFinished":
            walls.append(time.perf_counter() - stamp[0])
            extra = event.trace.evaluation.extra  # type: ignore[attr-defined]
            harness.append(float(extra.get("harness_seconds", 0.0)))
            status = event.trace.evaluation.status.value  # type: ignore[attr-defined]
            if status != "PASSED":
                raise SystemExit(f"{solution.name} did not pass ({status}); pick a correct one")

    with Benchmark(trace_set, cfg) as bench:
        bench.run_solution(solution, workloads, on_event=on_event)
    # The first workload also waits for the processes to start: counted apart.
    return walls[1:], harness[1:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--fork",
        action="store_true",
        help="this fork's solution and dataset (config.toml), as run_local",
    )
    parser.add_argument("--workloads", type=int, default=8, help="first N workloads")
    parser.add_argument("--dataset", type=Path)
    parser.add_argument("--definition", default="toy_axpy")
    parser.add_argument("--solution", default="correct")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 2 workloads, 1 round, few calls"
    )
    args = parser.parse_args()
    if args.quick:
        args.workloads, args.rounds, args.warmup, args.iterations = 2, 1, 1, 2

    tmp = Path(tempfile.mkdtemp(prefix="bench-isolation-"))
    try:
        if not args.fork and args.dataset is None:
            args.dataset = _toy_dataset(tmp / "dataset")
        cfg = BenchmarkConfig(
            device=args.device,
            warmup_runs=args.warmup,
            iterations=args.iterations,
            num_trials=3,
            definitions=(args.definition,),
        )
        figures: dict[bool, list[float]] = {False: [], True: []}
        inner: dict[bool, list[float]] = {False: [], True: []}
        for round_ in range(args.rounds + 1):
            for trusted in (True, False):
                walls, harness = _one_pass(args, tmp, cfg, trusted)
                if round_ > 0:  # the first round fills the caches
                    figures[trusted] += walls
                    inner[trusted] += harness
        n = len(figures[False])
        before = statistics.median(figures[True])
        after = statistics.median(figures[False])
        print(
            f"definition {args.definition}, solution {args.solution}, device {args.device}, "
            f"{n} workload runs per mode ({args.rounds} rounds)"
        )
        print(
            f"  in-worker checks (before): median {before * 1e3:8.1f} ms per workload "
            f"(worker harness {statistics.median(inner[True]) * 1e3:.1f} ms)"
        )
        print(
            f"  judge process    (after):  median {after * 1e3:8.1f} ms per workload "
            f"(worker harness {statistics.median(inner[False]) * 1e3:.1f} ms)"
        )
        print(
            f"  overhead: {(after - before) * 1e3:+.1f} ms per workload "
            f"({(after / before - 1) * 100 if before > 0 else 0:+.1f} %)"
        )
    finally:
        os.environ.pop("FIB_TRUSTED_CHECKS", None)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
