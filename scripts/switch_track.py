"""Switch this fork to another definition or language.

    python scripts/switch_track.py gdn_prefill_qk4_v8_d128_k_last
    python scripts/switch_track.py gdn_decode_qk4_v8_d128_k_last --language cuda
    python scripts/switch_track.py --list

Installs the definition's starter into solution/<language>/ and rewrites config.toml.
Refuses to overwrite your own work in solution/<language>/ unless --force is given (the old
folder is then kept as solution/<language>.backup-<time>).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the vendored fib_core

from fib_core.project.entry import run_script  # noqa: E402
from fib_core.project.switch import available_starters, switch_track  # noqa: E402
from fib_core.project.tracks import TRACKS  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("definition", nargs="?", help="exact definition name")
    parser.add_argument("--language", choices=["triton", "cuda", "python"])
    parser.add_argument("--force", action="store_true", help="replace existing work (kept as a backup)")
    parser.add_argument("--list", action="store_true", help="list tracks, definitions and starters")
    args = parser.parse_args()

    starters = available_starters(ROOT)
    if args.list or not args.definition:
        for track, defs in TRACKS.items():
            print(track)
            for d in defs:
                print(f"  {d:<62} starters: {', '.join(starters.get(d, [])) or '-'}")
        return 0 if args.list else 2
    result = switch_track(ROOT, args.definition, args.language, force=args.force)
    print(f"installed starters/{result.definition}/{result.language}/ into {result.installed}")
    if result.backup:
        print(f"your previous work is in {result.backup}")
    print("config.toml rewritten; next: python scripts/run_local.py")
    return 0


if __name__ == "__main__":
    run_script(main)
