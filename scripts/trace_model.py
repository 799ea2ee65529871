"""Record the GDN workloads of the tiny demo model with the tracer, into a dataset folder.

    python scripts/trace_model.py --dataset runs/demo/dataset
    python scripts/trace_model.py --dataset DIR --batches 1 8 32 --prompt-len 64 --device cuda

Runs ``examples/tiny_gdn`` (random weights, nothing downloaded) with tracing on: every GDN
prefill and decode call is recorded, deduplicated by the kit's rules (decode by batch size,
prefill by shape and average sequence length, ``cu_seqlens`` kept as a safetensors blob) and
written under DIR/traces/workloads/. The folder gets the two GDN definitions if it lacks them,
so it loads as a dataset: benchmark on the recorded shapes with

    FIB_DATASET_PATH=DIR python scripts/run_local.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the vendored fib_core and examples/

from fib_core.errors import ConfigError  # noqa: E402
from fib_core.project.entry import run_script  # noqa: E402

GDN_DEFINITIONS = ("gdn_decode_qk4_v8_d128_k_last", "gdn_prefill_qk4_v8_d128_k_last")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--dataset", type=Path, required=True, help="dataset folder to write into")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4], metavar="N")
    p.add_argument("--prompt-len", type=int, default=8, help="tokens per prompt (about)")
    p.add_argument("--new-tokens", type=int, default=2, help="decode steps per batch")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda when available")
    a = p.parse_args(argv)
    for name in ("prompt_len", "new_tokens", "layers"):
        if getattr(a, name) < 1:
            raise ConfigError(
                f"--{name.replace('_', '-')}: found {getattr(a, name)}, expected >= 1"
            )
    if any(b < 1 for b in a.batches):
        raise ConfigError(f"--batches: found {a.batches}, expected sizes >= 1")
    return a


def prepare_dataset(root: Path) -> None:
    """Make ``root`` a dataset folder holding the GDN definitions (existing files are kept)."""
    from fib_core.data.json_io import dump_json
    from fib_core.tracer import kit_definitions

    if root.exists() and not root.is_dir():
        raise ConfigError(f"--dataset {root}: is a file; give a folder")
    definitions = kit_definitions()
    for name in GDN_DEFINITIONS:
        definition = definitions[name]
        path = root / "definitions" / definition.op_type / f"{name}.json"
        if not path.exists():
            dump_json(definition, path)


def trace(args: argparse.Namespace) -> dict[str, dict[str, int]]:
    import torch

    from examples.tiny_gdn.model import TinyGDN, make_prompts
    from fib_core.tracer import disable_tracing, enable_tracing

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA GPU is visible here; drop --device")
    model = TinyGDN(layers=args.layers).to(device)
    enable_tracing(
        out_dir=args.dataset / "traces" / "workloads",
        blob_dir=args.dataset / "blob" / "workloads",
        dataset_root=args.dataset,
    )
    try:
        for batch in args.batches:
            model.generate(make_prompts(batch, args.prompt_len), args.new_tokens)
    finally:
        stats = disable_tracing()
    return stats


def main() -> int:
    args = parse_args()
    prepare_dataset(args.dataset)
    stats = trace(args)
    for name, s in sorted(stats.items()):
        print(
            f"{name}: {s['collected']} calls recorded, {s['written']} workloads written"
            f" ({s['blobs']} blobs)"
        )
    print(f"dataset: {args.dataset}")
    print(f"benchmark on these shapes: FIB_DATASET_PATH={args.dataset} python scripts/run_local.py")
    return 0


if __name__ == "__main__":
    run_script(main)
