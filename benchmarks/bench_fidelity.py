"""The kit against the organizers' harness: same packed solution, same workloads, same GPU.

    python benchmarks/bench_fidelity.py --organizers ../flashinfer-bench            # all five
    python benchmarks/bench_fidelity.py --defs gdn_decode_qk4_v8_d128_k_last -n 6
    python benchmarks/bench_fidelity.py --solution solution.json -n 6             # your own
    python benchmarks/bench_fidelity.py --quick                                    # CPU: set-up only

For each definition, its default Triton starter (or ``--solution``, a packed ``solution.json``)
runs on the first ``-n`` workloads of the embedded dataset twice: through the kit
(``run_local.py --contest``'s flow: the organizers' settings for that definition, isolated) and
through the organizers' ``flashinfer-bench run --use-isolated-runner`` with the same settings,
on a trace set this script writes (the definition, the chosen workloads, the solution; the
dataset's blobs linked in). Printed per workload: both verdicts, and the kit/organizers ratio
of the solution latency, the reference latency and the speedup; per definition the median
ratios and whether every ratio is within 10 % and each median within 5 %.

``--organizers`` is a source checkout of flashinfer-bench (its folder holding the
``flashinfer_bench`` package) or left out for an installed one. Their timer imports
``flashinfer.testing`` (the flashinfer-python package; only that module is used) and times with
CUPTI when ``cupti-python`` >= 13 is installed, else with CUDA events, as their run then warns.
``--order org-first`` runs theirs first (GPU clocks and caches warm the other way round).
Exit 0: compared (within bounds or not: the table says); 2: bad usage; 3: no GPU (``--quick``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import needs_gpu, starter_fork

DEFINITIONS = (
    "gdn_decode_qk4_v8_d128_k_last",
    "gdn_prefill_qk4_v8_d128_k_last",
    "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
    "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64",
    "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048",
)
BLOB_MAX_BYTES = 64 << 20
PER_WORKLOAD_BOUND = 0.10
MEDIAN_BOUND = 0.05


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--defs", nargs="+", default=list(DEFINITIONS), metavar="DEF")
    p.add_argument("-n", "--workloads", type=int, default=6, help="first N workloads (6)")
    p.add_argument("--uuids", nargs="+", help="these workloads instead (uuid prefixes)")
    p.add_argument("--solution", type=Path, help="a packed solution.json (one definition)")
    p.add_argument("--organizers", type=Path, help="flashinfer-bench source checkout")
    p.add_argument("--order", choices=("kit-first", "org-first"), default="kit-first")
    p.add_argument("--default-run", action="store_true",
                   help="also the kit's everyday run (persistent worker, local settings)")
    p.add_argument("--out", type=Path, help="write the per-workload rows here (JSON)")
    p.add_argument("--quick", action="store_true", help="set-up only, no GPU needed")
    args = p.parse_args(argv)
    if args.solution is not None and len(args.defs) != 1:
        p.error("--solution is for one definition: name it with --defs")
    unknown = sorted(set(args.defs) - set(DEFINITIONS))
    if unknown:
        p.error(f"unknown definition {unknown[0]!r}; choose from {', '.join(DEFINITIONS)}")
    if args.organizers is not None and not (args.organizers / "flashinfer_bench").is_dir():
        p.error(f"--organizers {args.organizers}: no flashinfer_bench package folder in it")
    return args


def _solution(definition: str, args: argparse.Namespace, scratch: Path) -> tuple[Any, Any]:
    """(kit config of a scratch fork, packed Solution) for the starter or ``--solution``."""
    from fib_core.data import Solution
    from fib_core.project.pack import pack_solution

    cfg = starter_fork(definition, scratch, name=f"fidelity-{definition[:20]}")
    if args.solution is not None:
        solution = Solution.from_dict(json.loads(args.solution.read_text()))
        if solution.definition != definition:
            raise SystemExit(f"--solution {args.solution}: it is for {solution.definition}")
        return cfg, solution
    return cfg, pack_solution(cfg)


def _workloads(dataset: Path, definition: str, args: argparse.Namespace) -> list[dict]:
    """The chosen workload records (the dataset's JSONL lines, parsed)."""
    (path,) = dataset.glob(f"workloads/*/{definition}.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if args.uuids:
        return [r for r in lines if any(r["workload"]["uuid"].startswith(u) for u in args.uuids)]
    return lines[: args.workloads]


def _structured_blobs(dataset: Path, definition: str, records: list[dict], root: Path) -> None:
    """Inputs a workload leaves "random" that the kit draws with the definition's own
    generator (normalised keys, gates in their ranges, boundaries) are written as blobs for
    the organizers' run, so both check and time the same data: their harness draws N(0, 1)
    for every "random" input (the contest's own workloads carry real tensors as blobs).
    Inputs over BLOB_MAX_BYTES stay random there (weights, caches: same distribution)."""
    import torch
    from safetensors.torch import save_file

    from fib_core.bench.evaluation.inputs import generate_inputs, input_generator_for
    from fib_core.data import TraceSet
    from fib_core.data.workload import Workload

    if input_generator_for(definition) is None:
        return
    spec = TraceSet.from_path(str(dataset)).definitions[definition]
    for record in records:
        workload = Workload.from_dict(record["workload"])
        values = dict(zip(spec.input_names, generate_inputs(
            spec, workload, seed=0, device="cpu", dataset_root=str(dataset)), strict=True))
        blobs = {}
        for name, given in record["workload"]["inputs"].items():
            value = values.get(name)
            if given.get("type") == "random" and isinstance(value, torch.Tensor) \
                    and value.numel() * value.element_size() <= BLOB_MAX_BYTES:
                blobs[name] = value.contiguous()
        if not blobs:
            continue
        rel = f"fidelity_blobs/{definition}/{workload.uuid}.safetensors"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        save_file(blobs, str(root / rel))
        for name in blobs:
            record["workload"]["inputs"][name] = {"type": "safetensors", "path": rel,
                                                  "tensor_key": name}


def _organizers_set(dataset: Path, definition: str, records: list[dict], solution: Any,
                    root: Path) -> None:
    """A trace set for the organizers' CLI: the definition, the workloads (structured integer
    inputs as blobs), the solution, and the dataset's blobs linked in (workload paths are
    relative to the set's root)."""
    (def_file,) = dataset.glob(f"definitions/*/{definition}.json")
    op = def_file.parent.name
    records = json.loads(json.dumps(records))  # the kit's run keeps the records as they are
    _structured_blobs(dataset, definition, records, root)
    (root / "definitions" / op).mkdir(parents=True)
    shutil.copy(def_file, root / "definitions" / op / def_file.name)
    (root / "workloads" / op).mkdir(parents=True)
    (root / "workloads" / op / f"{definition}.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records)
    )
    sol_dir = root / "solutions" / (solution.author or "kit") / definition
    sol_dir.mkdir(parents=True)
    (sol_dir / f"{solution.name}.json").write_text(json.dumps(solution.to_dict()))
    if (dataset / "blob").exists():
        (root / "blob").symlink_to(dataset / "blob")


def _run_organizers(root: Path, definition: str, solution: Any, args: argparse.Namespace,
                    log: Path) -> tuple[dict[str, dict], float]:
    """Their `flashinfer-bench run`, isolated, with the definition's contest settings."""
    from fib_core.bench.grading import eval_settings

    c = eval_settings(definition).contest_fields()
    argv = ["run", "--local", str(root), "--use-isolated-runner", "--definitions", definition,
            "--solutions", solution.name, "--warmup-runs", str(c["warmup_runs"]),
            "--iterations", str(c["iterations"]), "--num-trials", str(c["num_trials"]),
            "--timeout", str(int(c["timeout_seconds"]))]
    for key, flag in (("atol", "--atol"), ("rtol", "--rtol"),
                      ("required_matched_ratio", "--required-matched-ratio")):
        if c.get(key) is not None:
            argv += [flag, str(c[key])]
    env = dict(os.environ)
    if args.organizers is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(args.organizers.resolve()), env.get("PYTHONPATH")) if p)
    code = ("import sys; from flashinfer_bench.cli.main import cli; "
            f"sys.argv = ['flashinfer-bench'] + {argv!r}; cli()")
    started = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT,
                              env=env, cwd=root)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        print(f"  organizers' run exited {done.returncode}; its log: {log}", file=sys.stderr)
    rows: dict[str, dict] = {}
    for path in sorted((root / "traces").rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            t = json.loads(line)
            ev = t.get("evaluation") or {}
            perf = ev.get("performance") or {}
            rows[t["workload"]["uuid"]] = {
                "status": ev.get("status"),
                "latency_ms": perf.get("latency_ms"),
                "reference_latency_ms": perf.get("reference_latency_ms"),
                "speedup": perf.get("speedup_factor"),
            }
    return rows, wall


def _run_kit(cfg: Any, solution: Any, uuids: list[str], contest: bool = True
             ) -> tuple[dict[str, dict], float]:
    """The kit's --contest flow on these workloads (else a plain run_local.py's)."""
    from fib_core.project.runflow import RunOptions, execute_on_gpus, make_request
    from fib_core.project.workspace import resolve_dataset

    opts = RunOptions(flags={"workloads": tuple(uuids)}, contest=contest, ledger=False)
    request = make_request(cfg, solution, opts)
    request.dataset_path = str(resolve_dataset()[0])
    started = time.perf_counter()
    shards = execute_on_gpus(request, None)
    wall = time.perf_counter() - started
    rows: dict[str, dict] = {}
    for shard in shards:
        for t in shard.traces:
            ev = t.evaluation
            perf = ev.performance if ev is not None else None
            extra = (perf.extra or {}) if perf is not None else {}
            rows[t.workload.uuid] = {
                "status": ev.status.value if ev is not None else None,
                "latency_ms": perf.latency_ms if perf else None,
                "reference_latency_ms": perf.reference_latency_ms if perf else None,
                "speedup": perf.speedup_factor if perf else None,
                "method": extra.get("timing_method"),
                "busy_ms": extra.get("busy_ms"),
                "warnings": extra.get("timing_warnings", []),
            }
    return rows, wall


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def compare(kit: dict[str, dict], org: dict[str, dict], uuids: list[str]) -> dict[str, Any]:
    """Per-workload rows (verdicts, kit/organizers ratios) and the definition's summary."""
    rows, keys = [], ("latency_ms", "reference_latency_ms", "speedup")
    for u in uuids:
        k, o = kit.get(u, {}), org.get(u, {})
        rows.append({"uuid": u, "kit": k, "organizers": o,
                     "ratios": {key: _ratio(k.get(key), o.get(key)) for key in keys}})
    medians, within = {}, True
    for key in keys:
        values = [r["ratios"][key] for r in rows if r["ratios"][key] is not None]
        medians[key] = statistics.median(values) if values else None
        within &= bool(values) and len(values) == len(rows)
        within &= all(abs(v - 1) <= PER_WORKLOAD_BOUND for v in values)
        within &= medians[key] is not None and abs(medians[key] - 1) <= MEDIAN_BOUND
    same = all(r["kit"].get("status") == r["organizers"].get("status") for r in rows)
    cupti = all(r["kit"].get("method") == "cupti" for r in rows if r["kit"].get("latency_ms"))
    return {"rows": rows, "medians": medians, "verdicts_agree": same, "within_bounds": within,
            "kit_used_cupti": cupti}


def default_vs_contest(plain: dict[str, dict], contest: dict[str, dict], uuids: list[str]
                       ) -> dict[str, Any]:
    """The everyday run (persistent) against --contest (isolated), both the kit's: per
    workload the latency ratio; printed as one line."""
    ratios = [_ratio(plain.get(u, {}).get("latency_ms"), contest.get(u, {}).get("latency_ms"))
              for u in uuids]
    known = [r for r in ratios if r is not None]
    same = all(plain.get(u, {}).get("status") == contest.get(u, {}).get("status") for u in uuids)
    line = (f"  default run / --contest latency: median {_fmt(statistics.median(known))}, "
            f"range {_fmt(min(known))}-{_fmt(max(known))}; verdicts "
            f"{'agree' if same else 'DIFFER'}") if known else "  default run: no latencies"
    print(line)
    return {"ratios": ratios, "verdicts_agree": same}


def _fmt(v: float | None, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def print_table(definition: str, result: dict[str, Any]) -> None:
    print(f"\n== {definition}")
    print(f"  {'workload':<9} {'kit':<20} {'organizers':<20} {'sol us kit/org':>20} "
          f"{'ratio':>6} {'ref ratio':>9} {'speedup ratio':>13}")
    for r in result["rows"]:
        k, o, q = r["kit"], r["organizers"], r["ratios"]
        lat = f"{_fmt(_us(k.get('latency_ms')), '.2f')}/{_fmt(_us(o.get('latency_ms')), '.2f')}"
        print(f"  {r['uuid'][:8]:<9} {str(k.get('status')):<20} {str(o.get('status')):<20} "
              f"{lat:>20} {_fmt(q['latency_ms']):>6} {_fmt(q['reference_latency_ms']):>9} "
              f"{_fmt(q['speedup']):>13}")
    m = result["medians"]
    print(f"  medians kit/org: solution {_fmt(m['latency_ms'])}, reference "
          f"{_fmt(m['reference_latency_ms'])}, speedup {_fmt(m['speedup'])}; verdicts "
          f"{'agree' if result['verdicts_agree'] else 'DIFFER'}; "
          f"{'within' if result['within_bounds'] else 'OUTSIDE'} the bounds; kit timer "
          f"{'CUPTI on every workload' if result['kit_used_cupti'] else 'NOT always CUPTI'}")


def _us(ms: float | None) -> float | None:
    return None if ms is None else ms * 1e3


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from fib_core.project.workspace import resolve_dataset

    dataset = resolve_dataset()[0]
    scratch = Path(tempfile.mkdtemp(prefix="fib-fidelity-"))
    results: dict[str, Any] = {}
    try:
        for definition in args.defs:
            cfg, solution = _solution(definition, args, scratch / "forks")
            records = _workloads(dataset, definition, args)
            uuids = [r["workload"]["uuid"] for r in records]
            org_root = scratch / "organizers" / definition
            _organizers_set(dataset, definition, records, solution, org_root)
            if args.quick:
                print(f"{definition}: {len(uuids)} workloads, trace set at {org_root}")
                continue
            log = scratch / f"{definition}.organizers.log"
            order = ["kit", "organizers"]
            if args.order == "org-first":
                order.reverse()
            got = {}
            for name in order:
                if name == "kit":
                    got[name], wall = _run_kit(cfg, solution, uuids)
                else:
                    got[name], wall = _run_organizers(org_root, definition, solution, args, log)
                print(f"  [{definition}] {name}: {len(got[name])} traces in {wall:.1f} s",
                      flush=True)
            results[definition] = compare(got["kit"], got["organizers"], uuids)
            print_table(definition, results[definition])
            if args.default_run:
                plain, wall = _run_kit(cfg, solution, uuids, contest=False)
                print(f"  [{definition}] kit's default run: {len(plain)} traces in {wall:.1f} s")
                results[definition]["default_run"] = default_vs_contest(plain, got["kit"], uuids)
            if not got["organizers"] and log.exists():
                print("  organizers' log tail:\n" + "".join(log.read_text().splitlines(True)[-15:]))
    finally:
        if args.out is not None and results:
            args.out.write_text(json.dumps(results, indent=1))
        shutil.rmtree(scratch, ignore_errors=True)
    if args.quick:
        return needs_gpu("bench_fidelity.py", "trace sets written")
    return 0


if __name__ == "__main__":
    import torch

    if "--quick" not in sys.argv and not torch.cuda.is_available():
        sys.exit(needs_gpu("bench_fidelity.py"))
    sys.exit(main())
