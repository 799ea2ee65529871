"""Loading a workload's cached reference outputs in the judge: the signed cache, old and new way.

A warm re-run makes no reference call: the judge loads every checked set's outputs from the
signed disk cache (ten sets per workload; a batch-64 GDN decode set is 33.6 MB), verifying each
file's HMAC first. This prints, for ``--sets`` such files, the seconds to load them

- ``copying``: each file read, verified, then deserialised by ``safetensors`` (copies);
- ``views``: read into one buffer, verified, tensors as views of it (what the judge does for a
  file it was not asked to prefetch);
- ``prefetched``: the files verified side by side in threads first (what the judge does for a
  workload's sets), then loaded as views.

    python benchmarks/bench_reference_cache.py [--batch 64] [--sets 10] [--repeats 3]
    python benchmarks/bench_reference_cache.py --quick     # batch 8, 4 sets: seconds anywhere

Tensors land on the CPU here (``--device cuda`` adds the host-to-device copy on a GPU).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64, help="GDN decode batch size of each set")
    p.add_argument("--sets", type=int, default=10, help="files per workload")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--quick", action="store_true", help="batch 8, 4 sets, 2 repeats")
    args = p.parse_args(argv)
    if args.quick:
        args.batch, args.sets, args.repeats = 8, 4, 2
    return args


def _copying(cache, definition, keys: list[str], device: str) -> list:
    """The previous loader: bytes, HMAC, safetensors' own deserialisation (copies)."""
    from safetensors.torch import load

    from fib_core.bench.evaluation.signed_cache import _digest

    out = []
    for key in keys:
        path = cache._path(definition, key, ".safetensors")
        data = path.read_bytes()
        sig = path.with_name(path.name + ".sig").read_text().strip()
        assert sig == _digest(cache.key, data)
        tensors = load(data)
        out.append([tensors[n].to(device) for n in definition.output_names])
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from fib_core.bench.evaluation.signed_cache import SignedReferenceCache
    from fib_core.bench.integrity import ensure_key

    definition = SimpleNamespace(name="gdn_decode", output_names=["output", "new_state"])
    outs = [torch.randn(args.batch, 1, 8, 128).bfloat16(), torch.randn(args.batch, 8, 128, 128)]
    size_mb = sum(t.numel() * t.element_size() for t in outs) / 1e6
    keys = [f"set{k}" for k in range(args.sets)]
    with tempfile.TemporaryDirectory(prefix="fib-refcache-") as tmp:
        root = Path(tmp)
        cache = SignedReferenceCache(ensure_key(root), root)
        for key in keys:
            cache.store_outputs(definition, key, outs)

        def views() -> list:
            return [cache.load_outputs(definition, k, args.device) for k in keys]

        def prefetched() -> list:
            cache.prefetch_outputs(definition, keys)
            return views()

        ways = {
            "copying": lambda: _copying(cache, definition, keys, args.device),
            "views": views,
            "prefetched": prefetched,
        }
        print(f"{args.sets} signed files of {size_mb:.1f} MB (GDN decode, batch {args.batch}), "
              f"device {args.device}, median of {args.repeats}")
        for name, load in ways.items():
            times = []
            for _ in range(args.repeats):
                started = time.perf_counter()
                got = load()
                times.append(time.perf_counter() - started)
            if not all(torch.equal(g[1].cpu(), outs[1]) for g in got):
                print(f"error: {name} loaded different outputs", file=sys.stderr)
                return 1
            print(f"  {name:<11} {statistics.median(times):7.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
