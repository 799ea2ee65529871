"""Write the HTML report of the recorded runs: plots, tables, history, comparison, environment.

    python scripts/report.py                        # runs/report.html: each definition's last run
    python scripts/report.py --run best --compare last --out best.html
    python scripts/report.py --png runs/report.png  # also a screenshot (needs headless Chromium)

Reads runs/ledger.jsonl (every run_local.py run adds a record). By default each definition's
newest run is compared with the run before it on the same kind of device. The page is one
self-contained file (inline SVG, no network); plots need matplotlib: pip install -e ".[plot]".
Exit status: 0, or 2 for a usage error (no ledger, no matching run, unwritable output).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the vendored fib_core

from fib_core.errors import FibError  # noqa: E402
from fib_core.project.entry import run_script  # noqa: E402
from fib_core.report.ledger import LEDGER_RELPATH  # noqa: E402

DEFAULT_OUT = Path("runs") / "report.html"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--ledger", type=Path, default=LEDGER_RELPATH, help="default: %(default)s")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="default: %(default)s")
    p.add_argument("--definition", help="only this definition (default: every one recorded)")
    p.add_argument(
        "--run",
        default="last",
        metavar="REF",
        help="last (default), best, or a commit / run-id prefix",
    )
    p.add_argument(
        "--compare",
        metavar="REF",
        help="last, best, a commit / run-id prefix, or none (default: the run before)",
    )
    p.add_argument(
        "--png",
        type=Path,
        metavar="PATH",
        help="also render the page to a PNG with headless Chromium",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from fib_core.report.html import build_html
    from fib_core.report.ledger import load_ledger
    from fib_core.report.report_sections import sections_for

    a = parse_args(argv)
    if not a.ledger.is_file():
        raise FibError(
            f"{a.ledger}: no ledger yet; run scripts/run_local.py first (each run is recorded), "
            "or pass --ledger PATH"
        )
    records = load_ledger(a.ledger)
    sections = sections_for(
        records, definition=a.definition, run=a.run, compare=a.compare, source=a.ledger
    )
    from fib_core.atomic import atomic_write_text

    try:
        atomic_write_text(a.out, build_html(sections))
    except OSError as err:
        raise FibError(
            f"{a.out}: cannot write the report ({err.strerror}); pass --out PATH"
        ) from None
    print(f"report of {len(sections)} definition(s) written to {a.out}")
    if a.png is not None:
        from fib_core.report.browser import screenshot

        print(f"screenshot written to {screenshot(a.out, a.png)}")
    return 0


if __name__ == "__main__":
    run_script(main)
