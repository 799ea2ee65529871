"""Score precision and selection failures of the DSA indexer starter per tensor-core operand type.

Hopper's FP8 tensor cores do not accumulate in full fp32, so FP8 operands can move a token's
score enough to swap it with a near-tied neighbour at the top-k boundary; bf16 operands (FP8
values are exact in bf16) accumulate in fp32. For each operand type this prints, over many
seeded input sets: the largest score error against fp32 scores, the number of sets whose
selection fails the sorted-scores check (atol = rtol = 1e-2), and the latency (do_bench).

    python benchmarks/stress_dsa_indexer.py [--sets 64]
    python benchmarks/stress_dsa_indexer.py --quick   # 4 sets of one shape (CPU: inputs, exit 3)
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import torch
import triton

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_common import needs_gpu  # noqa: E402


def _helpers():
    spec = importlib.util.spec_from_file_location("dsa_test_helpers",
                                                  REPO / "tests" / "starters" / "test_dsa.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


T = _helpers()


def kernel_scores(mod, inputs, operands: str) -> torch.Tensor:
    """The score kernel's output alone, launched as ``run`` launches it."""
    q, cache, weights, seq_lens, table = inputs
    batch, heads, dim = q.shape
    page_size = cache.shape[1]
    max_pages = table.shape[1]
    scores = torch.zeros((batch, max_pages * page_size), dtype=torch.float32, device=q.device)
    mod._score_kernel[(max_pages, batch)](
        q, cache, weights, seq_lens, table, scores,
        heads, q.stride(0), q.stride(1), weights.stride(0), table.stride(0), scores.stride(0),
        PAGE=page_size, D=dim, BLOCK_H=max(16, triton.next_power_of_2(heads)),
        OPERANDS=mod._OPERANDS[operands], num_warps=4,
    )
    return scores


def ref_scores(inputs) -> torch.Tensor:
    q, cache, weights, seq_lens, table = inputs
    keys = T.reference(T.INDEXER).unpack_key_pages(cache)
    page_size = keys.shape[1]
    out = torch.zeros((q.shape[0], table.shape[1] * page_size), device=q.device)
    for b in range(q.shape[0]):
        n = int(seq_lens[b])
        pos = torch.arange(n, device=q.device)
        k = keys[table[b, pos // page_size].long(), pos % page_size]
        out[b, :n] = (torch.relu(q[b].float() @ k.T) * weights[b][:, None]).sum(0)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=64)
    parser.add_argument("--shapes", nargs="*", default=["29:83", "8:35", "30:32"])
    parser.add_argument("--quick", action="store_true", help="4 sets of one shape (8:35)")
    args = parser.parse_args()
    if args.quick:
        args.sets, args.shapes = min(args.sets, 4), ["8:35"]
    if not torch.cuda.is_available():
        if not args.quick:
            return needs_gpu("stress_dsa_indexer.py", "--quick builds one input set on a CPU")
        batch, max_pages = (int(x) for x in args.shapes[0].split(":"))
        inputs = T.make_indexer_inputs(batch, max_pages, seed=10_000, device="cpu")
        scores = ref_scores(inputs)
        return needs_gpu("stress_dsa_indexer.py", f"8:35: fp32 scores {tuple(scores.shape)}")
    mod = T.indexer_starter()
    print(f"device: {torch.cuda.get_device_name()}")
    print("shape   operands  max|err|  max err/|score|max  failing sets  latency us")
    for shape in args.shapes:
        batch, max_pages = (int(x) for x in shape.split(":"))
        for operands in ("fp8", "bf16"):
            worst_abs = worst_rel = 0.0
            failing = 0
            for seed in range(args.sets):
                inputs = T.make_indexer_inputs(batch, max_pages, seed=10_000 + seed,
                                               device="cuda")
                want = ref_scores(inputs)
                got = kernel_scores(mod, inputs, operands)
                for b in range(batch):
                    n = int(inputs[3][b])
                    err = (got[b, :n] - want[b, :n]).abs().max().item()
                    worst_abs = max(worst_abs, err)
                    worst_rel = max(worst_rel, err / max(want[b, :n].abs().max().item(), 1e-9))
                out = torch.full((batch, 2048), 12345, dtype=torch.int32, device="cuda")
                mod.run(*inputs, out, operands=operands)
                try:
                    T.check_topk(out, inputs)
                except AssertionError:
                    failing += 1
            inputs = T.make_indexer_inputs(batch, max_pages, seed=1, device="cuda")
            out = torch.full((batch, 2048), 0, dtype=torch.int32, device="cuda")
            us = triton.testing.do_bench(lambda i=inputs, o=out, op=operands: mod.run(
                *i, o, operands=op), return_mode="median") * 1e3
            print(f"{shape:7s} {operands:8s} {worst_abs:9.2e} {worst_rel:12.2e} "
                  f"{failing:6d}/{args.sets:<6d} {us:10.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
