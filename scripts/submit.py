"""Check, audit and tag a submission: one submission-<definition>-vN tag per definition.

    python scripts/submit.py --dry-run            # every check, no tag (on a GPU machine)
    python scripts/submit.py                      # ... then the tags, and the push command
    python scripts/submit.py --definition gdn_prefill_qk4_v8_d128_k_last
    python scripts/submit.py --dry-run --allow-smoke   # no GPU: a CPU correctness check

Needs a committed tree. Each definition is packed, audited (README, "Submission audit") and
must pass the organizers' settings on a GPU: a passing run of the same solution hash in
runs/ledger.jsonl (from run_local.py --contest) is accepted, otherwise it runs now. Without a
GPU those settings cannot run and nothing is tagged, unless --allow-smoke (the tag message then
says it was a CPU smoke check only; a passing CPU run of the same hash and settings in the
ledger is reused). Tags are made on commits whose config.toml names that one
definition; your branch, index and working tree are left as they are.
First of all, the files of the fork's definitions in $FIB_DATASET_PATH's dataset are validated
(`python -m fib_core validate`'s layout, definition, workload categories); an error stops there.
Exit status: 0 tagged (or a clean dry run), 1 refused by a check, 2 usage error (bad config,
uncommitted changes, no git repository).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the vendored fib_core

from fib_core.project.entry import run_script  # noqa: E402
from fib_core.project.submit import SubmitOptions, submit  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", type=Path, default=Path("config.toml"))
    parser.add_argument("--definition", metavar="NAME", help="only this definition of the fork")
    parser.add_argument("--dry-run", action="store_true", help="every check, but no tag")
    parser.add_argument(
        "--allow-smoke",
        action="store_true",
        help="without a GPU, tag after a CPU correctness check (not the organizers' settings)",
    )
    parser.add_argument(
        "--rerun", action="store_true", help="run again even when the ledger has a passing run"
    )
    a = parser.parse_args()
    options = SubmitOptions(
        definition=a.definition, dry_run=a.dry_run, allow_smoke=a.allow_smoke, rerun=a.rerun
    )
    from fib_core.validate.fork import check_fork

    if not check_fork(a.config, a.definition):  # the dataset's data for these definitions
        return 1
    return submit(a.config, options)


if __name__ == "__main__":
    run_script(main)
