"""How long ``TraceSet.from_path`` takes on a dataset of contest size.

Generates 5 definitions, 2,000 workloads and 50,000 traces (a mix of statuses, five authors
including the baseline) into a temporary folder, then loads it several times and prints the
timings and a per-phase profile summary. Run: ``python benchmarks/bench_traceset_load.py``
(``--quick``: a tiny dataset loaded once, for the CI smoke test; ``--traces 10000``: a
smaller synthetic set; ``--embedded``: the kit's embedded dataset instead of a generated one;
``--path DIR``: any dataset folder).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from fib_core.data import (
    AxisConst,
    AxisVar,
    BuildSpec,
    Correctness,
    Definition,
    Environment,
    Evaluation,
    EvaluationStatus,
    Performance,
    RandomInput,
    ScalarInput,
    Solution,
    SourceFile,
    TensorSpec,
    Trace,
    TraceSet,
    Workload,
)
from fib_core.data.json_io import dump_json, dump_jsonl

AUTHORS = ("baseline", "alice", "bob", "carol", "dave")
FAILURES = (
    EvaluationStatus.RUNTIME_ERROR,
    EvaluationStatus.INCORRECT_SHAPE,
    EvaluationStatus.COMPILE_ERROR,
    EvaluationStatus.TIMEOUT,
)


def make_definition(i: int) -> Definition:
    return Definition(
        name=f"synthetic_op_{i}",
        op_type=f"family_{i % 3}",
        axes={
            "tokens": AxisVar(description="rows"),
            "pages": AxisVar(),
            "hidden": AxisConst(128 * (i + 1), description="row width"),
        },
        inputs={
            "x": TensorSpec(["tokens", "hidden"], "bfloat16"),
            "table": TensorSpec(["tokens", "pages"], "int32"),
            "scale": TensorSpec(None, "float32"),
        },
        outputs={"y": TensorSpec(["tokens", "hidden"], "bfloat16")},
        reference="def run(x, table, scale):\n    return x * scale\n",
        tags=["synthetic"],
        constraints=["pages >= 1"],
    )


def make_workload(rng: random.Random, def_name: str) -> Trace:
    wl = Workload(
        uuid=str(uuid.UUID(int=rng.getrandbits(128))),
        axes={"tokens": rng.randint(1, 8192), "pages": rng.randint(1, 64)},
        inputs={"x": RandomInput(), "table": RandomInput(), "scale": ScalarInput(0.125)},
    )
    return Trace(definition=def_name, workload=wl)


def make_trace(rng: random.Random, workload_rec: Trace, solution: str, fail_rate: float) -> Trace:
    env = Environment(hardware="NVIDIA B200", libs={"torch": "2.9.0", "triton": "3.5.0"})
    if rng.random() >= fail_rate:
        latency = rng.uniform(0.005, 2.0)
        evaluation = Evaluation(
            status=EvaluationStatus.PASSED,
            log="",
            environment=env,
            timestamp="2026-01-15T10:00:00",
            correctness=Correctness(rng.uniform(0, 1e-3), rng.uniform(0, 1e-2)),
            performance=Performance(latency, latency * 1.3, 1.3),
        )
    else:
        evaluation = Evaluation(
            status=rng.choice(FAILURES), log="CUDA error: an illegal memory access",
            environment=env, timestamp="2026-01-15T10:00:00",
        )
    return Trace(workload_rec.definition, workload_rec.workload, solution, evaluation)


def generate(root: Path, n_defs: int, n_workloads: int, n_traces: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    per_def_workloads = n_workloads // n_defs
    per_def_traces = n_traces // n_defs
    for i in range(n_defs):
        definition = make_definition(i)
        dump_json(definition, root / "definitions" / definition.op_type / f"{definition.name}.json")
        workloads = [make_workload(rng, definition.name) for _ in range(per_def_workloads)]
        dump_jsonl(workloads, root / "workloads" / definition.op_type / f"{definition.name}.jsonl")
        for author in AUTHORS:
            sol = Solution(
                name=f"{author}_{definition.name}",
                definition=definition.name,
                author=author,
                spec=BuildSpec("triton", ["B200"], "main.py::run"),
                sources=[SourceFile("main.py", "def run(x, table, scale, y):\n    pass\n")],
            )
            dump_json(sol, root / "solutions" / author / f"{sol.name}.json")
            count = per_def_traces // len(AUTHORS)
            # One author's kernel fails now and then (score 0); the others always pass.
            fail_rate = 0.3 if author == AUTHORS[-1] else 0.0
            traces = [
                make_trace(rng, workloads[k % per_def_workloads], sol.name, fail_rate)
                for k in range(count)
            ]
            dump_jsonl(traces, root / "traces" / author / definition.op_type
                       / f"{definition.name}.jsonl")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--definitions", type=int, default=5)
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--traces", type=int, default=50000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="print the top functions")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--embedded", action="store_true",
                        help="load the kit's embedded dataset instead of generating one")
    source.add_argument("--path", type=Path, help="load this dataset folder instead")
    parser.add_argument("--quick", action="store_true",
                        help="2 definitions, 20 workloads, 200 traces, 1 load (CI smoke)")
    args = parser.parse_args()
    if args.quick:
        args.definitions, args.workloads, args.traces, args.repeats = 2, 20, 200, 1

    if args.embedded:
        from fib_core.dataset import embedded_dataset_path

        args.path = embedded_dataset_path()
    with tempfile.TemporaryDirectory(prefix="fib-bench-") as tmp:
        root = Path(tmp) if args.path is None else args.path
        t0 = time.perf_counter()
        if args.path is None:
            generate(root, args.definitions, args.workloads, args.traces)
        gen_s = time.perf_counter() - t0
        size_mb = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 1e6

        times, cpu_times = [], []
        for _ in range(args.repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            ts = TraceSet.from_path(root)
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
        n_traces = sum(len(v) for v in ts.traces.values())
        n_workloads = sum(len(v) for v in ts.workloads.values())

        t0 = time.perf_counter()
        ranking = ts.rank_authors()
        rank_s = time.perf_counter() - t0
        n_records = n_traces + n_workloads

        print(f"dataset: {len(ts.definitions)} definitions, {n_workloads} workloads, "
              f"{n_traces} traces, {size_mb:.1f} MB on disk (generated in {gen_s:.1f} s)")
        print(f"TraceSet.from_path over {args.repeats} runs: first {times[0]:.3f} s, "
              f"median {statistics.median(times):.3f} s, best {min(times):.3f} s "
              f"({min(times) / max(n_records, 1) * 1e6:.1f} us per record); "
              f"CPU time median {statistics.median(cpu_times):.3f} s, best {min(cpu_times):.3f} s")
        print(f"rank_authors: {rank_s:.3f} s -> {[(a, round(s.avg_speedup, 3)) for a, s in ranking]}")

        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            TraceSet.from_path(root)
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(12)
    if args.path is None and (n_traces != args.traces or len(ts.definitions) != args.definitions):
        print(f"error: loaded {n_traces} traces of {len(ts.definitions)} definitions, generated "
              f"{args.traces} of {args.definitions}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
