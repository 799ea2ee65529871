"""Sum each token's weighted expert outputs (at most 8 local ones) and round to bf16.

A gather rather than atomics in GEMM2: every output element is written once, in a fixed
order, so the result is deterministic and the output needs no zero-fill. Memory-bound: it reads
the pairs' rows of y (SPLIT2 parts each) and writes the bf16 output once.
"""

from __future__ import annotations

import triton
import triton.language as tl

BLOCK_C = 1024  # hidden columns per item


@triton.jit
def combine_phase(
    pid, num_programs,
    y_ptr, prow_ptr, counts_ptr, out_ptr, num_tokens, rows_total, stride_out,
    HIDDEN: tl.constexpr, E_LOCAL: tl.constexpr, E_PAD: tl.constexpr, TOPK: tl.constexpr,
    BLOCK_T: tl.constexpr, BLOCK_C: tl.constexpr, SPLIT: tl.constexpr,
):
    """Items (BLOCK_T tokens, BLOCK_C columns) = pid, pid + num_programs, ...; program 0 also
    sets the expert counts back to zero for the next call (nothing reads them after GEMM2).

    Several tokens per item keep enough bytes in flight when a few persistent programs per SM
    cover tens of thousands of tokens.
    """
    c_blocks = tl.cdiv(HIDDEN, BLOCK_C)
    t_blocks = tl.cdiv(num_tokens, BLOCK_T)
    for item in range(pid, t_blocks * c_blocks, num_programs):
        tokens = (item // c_blocks) * BLOCK_T + tl.arange(0, BLOCK_T)
        live = tokens < num_tokens
        cols = (item % c_blocks) * BLOCK_C + tl.arange(0, BLOCK_C)
        col_ok = cols < HIDDEN
        acc = tl.zeros([BLOCK_T, BLOCK_C], dtype=tl.float32)
        for k in tl.static_range(TOPK):
            prow = tl.load(prow_ptr + tokens * TOPK + k, mask=live, other=-1,
                           cache_modifier=".cg").to(tl.int64)
            take = (prow >= 0)[:, None] & col_ok[None, :]
            for s in tl.static_range(SPLIT):
                y = tl.load(y_ptr + (s * rows_total + prow)[:, None] * HIDDEN + cols[None, :],
                            mask=take, other=0.0, cache_modifier=".cg")
                acc += y.to(tl.float32)
        tl.store(out_ptr + tokens[:, None] * stride_out + cols[None, :], acc.to(tl.bfloat16),
                 mask=live[:, None] & col_ok[None, :])
    if pid == 0:
        experts = tl.arange(0, E_PAD)
        tl.store(counts_ptr + experts, experts * 0, mask=experts < E_LOCAL)
