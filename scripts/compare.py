"""Compare two saved runs (``run_local.py --json``) without running anything again.

    python scripts/compare.py base.json new.json          # new.json judged against base.json

Prints new.json's table with a "vs prev" column and the verdict counts: a change counts as
faster or slower only outside both runs' p10-p90 spread (and a 3 % floor); a workload timed
once in either run gets no verdict. Exit status: 0, or 2 for a missing or unreadable file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the vendored fib_core

from fib_core.project.entry import run_script  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    from fib_core.report.render import render_results
    from fib_core.report.results import RunResults

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("previous", type=Path, help="the earlier run's --json file")
    p.add_argument("current", type=Path, help="the later run's --json file")
    p.add_argument("--wide", action="store_true", help="every column, however wide")
    a = p.parse_args(argv)
    previous = RunResults.from_json(a.previous)
    current = RunResults.from_json(a.current)
    render_results(current, Console(), compare=previous, wide=a.wide)
    return 0


if __name__ == "__main__":
    run_script(main)
