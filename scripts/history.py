"""List the recorded runs of this fork: score, pass count, and what changed between runs.

    python scripts/history.py                          # every run in runs/ledger.jsonl
    python scripts/history.py --definition gdn_decode_qk4_v8_d128_k_last --last 10

Each run_local.py run appends one record to runs/ledger.jsonl (git-ignored). "changed" compares
a run with the previous run of the same definition: solution hash, commit, settings, machine.
Exit status: 0, or 2 for a usage error (an unreadable ledger, a --ledger file that is missing).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the vendored fib_core

from fib_core.errors import FibError  # noqa: E402
from fib_core.project.entry import run_script  # noqa: E402
from fib_core.report.ledger import LEDGER_RELPATH, load_ledger  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    from fib_core.report.history import history_rows, render_history

    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--ledger", type=Path, help=f"default: {LEDGER_RELPATH} in this folder")
    p.add_argument("--definition", help="only the runs of this definition")
    p.add_argument("--last", type=int, metavar="N", help="only the N newest runs")
    a = p.parse_args(argv)
    if a.last is not None and a.last < 1:
        raise FibError(f"--last: found {a.last}, expected a count >= 1")
    path = a.ledger or LEDGER_RELPATH
    if a.ledger is not None and not path.is_file():
        raise FibError(
            f"{path}: ledger not found; check --ledger (runs are recorded by run_local.py)"
        )
    rows = history_rows(load_ledger(path), definition=a.definition)
    console = Console()
    if not rows:
        what = f" of {a.definition}" if a.definition else ""
        console.print(f"no runs{what} recorded in {path} yet; every run_local.py run adds one")
        return 0
    if a.last is not None:
        rows = rows[-a.last :]
    render_history(rows, console, source=str(path))
    return 0


if __name__ == "__main__":
    run_script(main)
