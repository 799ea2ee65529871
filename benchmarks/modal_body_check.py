"""Run run_modal.py's container body in-process on this machine and compare with run_local.py.

    python benchmarks/modal_body_check.py --local-json run_local.json [--json modal.json]
    python benchmarks/modal_body_check.py --quick [--local-json run_local.json]

The Modal function's body (scripts/run_modal.py: run_shard) is executed here through
`.local()`, on the fork's config and the embedded dataset, split in `--parallel` shards; the
merged table is printed exactly as `modal run` would print it, then compared workload by
workload with a previous `run_local.py --json` file: the same workloads, the same verdict and
failure reason for each, and for passing ones the same error magnitudes (the same seed gives
the same inputs); the latency ratio is printed, not judged. Exit status: 0 when everything
matches, 1 on any difference or when there is nothing to compare, 3 for `--quick`, which builds
the request and its shards (checking that they cover the selection once) but runs nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from bench_common import NEEDS_GPU, REPO

ROOT = REPO


def compare_rows(local, remote) -> list[str]:
    """Differences between two RunResults, one line each (empty when they agree)."""
    a = {r.uuid: r for r in local.rows}
    b = {r.uuid: r for r in remote.rows}
    diffs = [f"{u[:8]}: only in run_local" for u in a.keys() - b.keys()]
    diffs += [f"{u[:8]}: only in the modal body" for u in b.keys() - a.keys()]
    for uuid in sorted(a.keys() & b.keys()):
        x, y = a[uuid], b[uuid]
        if x.status != y.status or (x.reason or "") != (y.reason or ""):
            diffs.append(f"{uuid[:8]}: {x.status} {x.reason or ''} vs {y.status} {y.reason or ''}")
            continue
        for name in ("max_abs_error", "max_rel_error"):
            u, v = getattr(x, name), getattr(y, name)
            if u is None or v is None or u != u or v != v:  # missing or NaN on a side
                if (u is None) != (v is None):
                    diffs.append(f"{uuid[:8]}: {name} {u} vs {v}")
                continue
            if abs(u - v) > 1e-6 + 0.05 * max(abs(u), abs(v)):
                diffs.append(f"{uuid[:8]}: {name} {u:.3g} vs {v:.3g}")
    return diffs


def main() -> int:
    from fib_core.project.run_finish import finish
    from fib_core.project.runflow import RunOptions, make_request
    from fib_core.project.workspace import open_workspace
    from fib_core.report.results import RunResults

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--local-json", type=Path, default=None)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="build the shards only; run nothing")
    args = p.parse_args()
    if args.local_json is None and not args.quick:
        p.error("--local-json is required (a run_local.py --json file to compare with)")
    local = RunResults.from_json(args.local_json) if args.local_json else None

    spec = importlib.util.spec_from_file_location("run_modal", ROOT / "scripts" / "run_modal.py")
    run_modal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_modal)

    ws = open_workspace(ROOT / "config.toml")
    with tempfile.TemporaryDirectory(prefix="modal-body-") as tmp:
        json_path = args.json or Path(tmp) / "modal.json"
        opts = RunOptions(json_path=json_path)
        request = make_request(ws.cfg, ws.pack(), opts, device="cuda")  # as run_modal.py
        shards = run_modal.split_request(request, args.parallel)
        assert [s.shard for s in shards] == list(range(args.parallel))
        assert all(s.num_shards == args.parallel and s.filters == request.filters for s in shards)
        if args.quick:
            rows = f", {len(local.rows)} local rows read" if local else ""
            print(
                f"modal_body_check: --quick: {len(shards)} shards of {request.definition} "
                f"built{rows}; nothing run, nothing compared",
                file=sys.stderr,
            )
            return NEEDS_GPU
        results = [run_modal.run_shard.local(asdict(shard), True, "unused") for shard in shards]
        finish(run_modal.collect(results), ws.definition, opts)
        remote = RunResults.from_json(json_path)

    common = {r.uuid for r in local.rows} & {r.uuid for r in remote.rows}
    if not common:
        print("error: no workload in both runs: nothing compared", file=sys.stderr)
        return 1
    diffs = compare_rows(local, remote)
    passed = lambda rows: sum(r.status == "PASSED" for r in rows)  # noqa: E731
    ratios = [
        y.latency_ms / x.latency_ms
        for x in local.rows
        for y in remote.rows
        if x.uuid == y.uuid and x.latency_ms and y.latency_ms
    ]
    ratio = f"; latency modal/local median {statistics.median(ratios):.3f}" if ratios else ""
    print(
        f"verdicts: run_local {passed(local.rows)}/{len(local.rows)} passed, modal body "
        f"{passed(remote.rows)}/{len(remote.rows)} passed; {len(common)} compared, "
        f"{'identical' if not diffs else f'{len(diffs)} DIFFERENT'}{ratio}"
    )
    for line in diffs:
        print("  " + line)
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
