"""Pack solution/<language>/ into solution.json, as config.toml describes.

    python scripts/pack_solution.py              # writes ./solution.json
    python scripts/pack_solution.py -o out.json
    python scripts/pack_solution.py --definition gdn_prefill_qk4_v8_d128_k_last
    python scripts/pack_solution.py --track      # solution-<definition>.json for each one
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the vendored fib_core

from fib_core.bench.containment.source_audit import audit_solution  # noqa: E402
from fib_core.data.json_io import dump_json  # noqa: E402
from fib_core.errors import ConfigError  # noqa: E402
from fib_core.project.entry import run_script  # noqa: E402
from fib_core.project.pack import describe  # noqa: E402
from fib_core.project.track_run import per_definition_path, selected_definitions  # noqa: E402
from fib_core.project.workspace import open_workspace  # noqa: E402

if TYPE_CHECKING:
    from fib_core.data import Solution


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=Path("solution.json"))
    parser.add_argument("--config", type=Path, default=Path("config.toml"))
    parser.add_argument("--definition", metavar="NAME", help="one definition of a track fork")
    parser.add_argument(
        "--track", action="store_true", help="every definition of the fork, one file each"
    )
    args = parser.parse_args()

    definitions = selected_definitions(args.config, args.definition, args.track)
    # Every definition is packed (config, sources, entry point, signature checked) before any
    # file is written: a mistake in one leaves no half-written set behind.
    packed = [pack_one(args.config, name) for name in definitions]
    for name, solution in zip(definitions, packed, strict=True):
        output = per_definition_path(args.output, name, args.track) if name else args.output
        write_one(solution, output)
    return 0


def pack_one(config: Path, definition: str | None) -> Solution:
    """Pack one definition of the fork (None: the default one), checked, without writing."""
    return open_workspace(config, definition).pack()


def write_one(solution: Solution, output: Path) -> None:
    """Write ``solution`` to ``output`` and say what it holds."""
    try:
        dump_json(solution, output)
    except OSError as err:
        raise ConfigError(
            f"{output}: cannot write ({err.strerror or err}); pass -o PATH in a writable folder"
        ) from None
    files = describe(solution)
    print(
        f"packed {solution.name} ({solution.spec.language}, entry {solution.spec.entry_point}, "
        f"{'destination-passing' if solution.spec.destination_passing_style else 'value-returning'})"
        f" for {solution.definition}"
    )
    for f in files:
        print(f"  {f.path:<40} {f.size:>8,d} bytes")
    print(f"wrote {output} ({len(files)} files, hash {solution.hash()[:12]})")
    for finding in audit_solution(solution):  # a warning, never a block
        print(f"warning: {finding}")


if __name__ == "__main__":
    run_script(main)
