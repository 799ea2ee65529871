"""Sum each token's weighted expert outputs (at most 8 local ones) and round to bf16.

A gather rather than atomics in GEMM2: every output element is written once, in a fixed
order, so the result is deterministic and the output needs no zero-fill. Memory-bound: it reads
the pairs' bf16 rows and writes the bf16 output once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .routing import TOP_K, Routing

BLOCK_C = 1024  # hidden columns per program


@triton.jit
def _combine_kernel(
    y_ptr, local_ptr, rank_ptr, counts_ptr, out_ptr,
    stride_y, stride_out,
    HIDDEN: tl.constexpr, E_LOCAL: tl.constexpr, E_PAD: tl.constexpr, TOPK: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < HIDDEN

    # First padded block of every expert (same layout as the GEMMs, see schedule.py).
    experts = tl.arange(0, E_PAD)
    counts = tl.load(counts_ptr + experts, mask=experts < E_LOCAL, other=0)
    blocks = (counts + BLOCK_M - 1) // BLOCK_M
    first_block = tl.cumsum(blocks, axis=0) - blocks

    acc = tl.zeros([BLOCK_C], dtype=tl.float32)
    for k in tl.static_range(TOPK):
        local = tl.load(local_ptr + token * TOPK + k)
        rank = tl.load(rank_ptr + token * TOPK + k)
        start = tl.sum(tl.where(experts == local, first_block, 0), axis=0)
        row = (start * BLOCK_M + rank).to(tl.int64)
        is_local = (cols * 0 + local) >= 0  # a vector: the interpreter rejects scalar masks here
        y = tl.load(y_ptr + row * stride_y + cols, mask=col_ok & is_local, other=0.0)
        acc += y.to(tl.float32)
    tl.store(out_ptr + token * stride_out + cols, acc.to(tl.bfloat16), mask=col_ok)


def combine(y: torch.Tensor, routing: Routing, block_m: int, output: torch.Tensor) -> None:
    """Write output[t] = sum over t's local choices of their rows of y (bf16)."""
    num_tokens, hidden = output.shape
    if output.stride(1) != 1:
        raise ValueError("output: the hidden dimension must be contiguous")
    grid = (num_tokens, triton.cdiv(hidden, BLOCK_C))
    _combine_kernel[grid](
        y, routing.local_ids, routing.ranks, routing.counts, output,
        y.stride(0), output.stride(0),
        HIDDEN=hidden, E_LOCAL=routing.num_local, E_PAD=triton.next_power_of_2(routing.num_local),
        TOPK=TOP_K, BLOCK_M=block_m, BLOCK_C=BLOCK_C,
        num_warps=4,
    )
