"""Switch this fork to another definition or language.

    python scripts/switch_track.py gdn_prefill_qk4_v8_d128_k_last
    python scripts/switch_track.py gdn_decode_qk4_v8_d128_k_last --language cuda
    python scripts/switch_track.py --list
    python scripts/switch_track.py gdn_prefill_qk4_v8_d128_k_last --add   # both GDN kernels

Installs the definition's starter into solution/<language>/ and rewrites config.toml.
Refuses to overwrite your own work in solution/<language>/ unless --force is given (the old
folder is then kept as solution/<language>.backup-<time>).
--add keeps the current kernel and adds the track's other definition beside it: every
definition then lives in solution/<definition>/<language>/ and config.toml gains a [track] table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the vendored fib_core

from fib_core.dataset.tracks import TRACKS  # noqa: E402
from fib_core.project.entry import run_script  # noqa: E402
from fib_core.project.switch import (  # noqa: E402
    add_definition,
    available_starters,
    switch_track,
)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("definition", nargs="?", help="exact definition name")
    parser.add_argument("--language", choices=["triton", "cuda", "python"])
    parser.add_argument("--force", action="store_true", help="replace existing work (kept as a backup)")
    parser.add_argument(
        "--add", action="store_true", help="add this definition of the track beside your kernel"
    )
    parser.add_argument("--list", action="store_true", help="list tracks, definitions and starters")
    args = parser.parse_args()

    starters = available_starters(ROOT)
    if args.list or not args.definition:
        for track, defs in TRACKS.items():
            print(track)
            for d in defs:
                print(f"  {d:<62} starters: {', '.join(starters.get(d, [])) or '-'}")
        return 0 if args.list else 2
    if args.add:
        result = add_definition(ROOT, args.definition, args.language)
        print(f"added starters/{result.definition}/{result.language}/ as {result.installed}")
        print("config.toml now lists the track; next: python scripts/run_local.py --track")
        return 0
    result = switch_track(ROOT, args.definition, args.language, force=args.force)
    print(f"installed starters/{result.definition}/{result.language}/ into {result.installed}")
    if result.backup:
        print(f"your previous work is in {result.backup}")
    print("config.toml rewritten; next: python scripts/run_local.py")
    return 0


if __name__ == "__main__":
    run_script(main)
