"""``python -m fib_core.dataset list [--plugins] [--track]``: the registered definitions.

One name a line, for scripts (``benchmarks/gpu_checks.sh`` loops over it); ``--plugins`` adds
which optional files each folder has, ``--track`` the contest track each belongs to.
"""

from __future__ import annotations

import argparse
import sys

from fib_core.dataset import registry
from fib_core.dataset.tracks import tracks
from fib_core.errors import FibError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fib_core.dataset")
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="registered definitions, one per line")
    listing.add_argument("--plugins", action="store_true", help="also the plugins each one has")
    listing.add_argument("--track", action="store_true", help="also each one's contest track")
    args = parser.parse_args(argv)
    try:
        track_of = {name: track for track, names in tracks().items() for name in names}
        for entry in registry.entries():
            parts = [entry.name]
            if args.track:
                parts.append(track_of.get(entry.name, "-"))
            if args.plugins:
                parts.append(",".join(registry.plugin_kinds(entry)) or "-")
            print("  ".join(parts))
    except FibError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
