"""Run run_modal.py's container body in-process on this machine and compare with run_local.py.

    python benchmarks/modal_body_check.py --local-json run_local.json [--json modal.json]

The Modal function's body (scripts/run_modal.py: run_shard) is executed here through
`.local()`, on the fork's config and the embedded dataset, split in `--parallel` shards; the
merged table is printed exactly as `modal run` would print it, then its verdicts are compared
workload by workload with a previous `run_local.py --json` file. Exit status 1 on any difference.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from fib_core.project.runflow import RunOptions, finish, make_request
    from fib_core.project.workspace import open_workspace
    from fib_core.report.results import RunResults

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--local-json", type=Path, required=True)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--parallel", type=int, default=2)
    args = p.parse_args()

    spec = importlib.util.spec_from_file_location("run_modal", ROOT / "scripts" / "run_modal.py")
    run_modal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_modal)

    ws = open_workspace(ROOT / "config.toml")
    opts = RunOptions(json_path=args.json)
    request = make_request(ws.cfg, ws.pack(), opts)
    results = [
        run_modal.run_shard.local(asdict(shard), True, "unused")
        for shard in run_modal.split_request(request, args.parallel)
    ]
    finish(run_modal.collect(results), ws.definition, opts)

    local = RunResults.from_json(args.local_json)
    remote = RunResults.from_json(args.json) if args.json else None
    if remote is None:
        return 0
    a = {r.uuid: r.status for r in local.rows}
    b = {r.uuid: r.status for r in remote.rows}
    same = a == b
    print(f"verdicts: run_local {sum(s == 'PASSED' for s in a.values())}/{len(a)} passed, "
          f"modal body {sum(s == 'PASSED' for s in b.values())}/{len(b)} passed, "
          f"{'identical' if same else 'DIFFERENT'} per workload")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
