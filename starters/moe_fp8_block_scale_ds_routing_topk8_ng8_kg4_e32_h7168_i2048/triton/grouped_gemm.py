"""The two grouped FP8 GEMMs over the local experts, with the 128 x 128 block scales.

GEMM1 (per expert, its tokens' rows): G = x @ W1^T, split as up = G[:, :I], gate = G[:, I:];
its epilogue applies SwiGLU, h = silu(gate) * up, and re-quantises h to e4m3 with one scale per
row and BLOCK_H columns, so that GEMM2 also runs on FP8 tensor cores.
GEMM2: y = h @ W2^T, times the pair's routing weight, stored in bf16 at the pair's padded row.

Both K loops step one scale block at a time: the FP8 dot of the step is exact products summed
by the tensor core, then multiplied by (activation scale per row) x (weight scale of the tile)
and added to an fp32 accumulator. Where the time goes: the K loops (HBM reads of the weight
tiles at small T, tensor-core work at large T); the epilogues are a small fraction.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .routing import TOP_K, Routing
from .schedule import block_bound, expert_table, locate_tile, round_to_e4m3
from .tiles import SCALE_BLOCK, TileConfig, num_programs


@triton.jit
def _gemm1_swiglu_kernel(
    x_ptr, xs_ptr, w_ptr, ws_ptr, counts_ptr, lists_ptr, hq_ptr, hs_ptr,
    num_tokens,
    stride_xt, stride_xsb, stride_xst,
    stride_we, stride_wn, stride_wk,
    stride_wse, stride_wsn, stride_wsk,
    stride_hq, stride_hs,
    HIDDEN: tl.constexpr, INTER: tl.constexpr,
    E_LOCAL: tl.constexpr, E_PAD: tl.constexpr, TOPK: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr,
    NUM_PROGS: tl.constexpr,
):
    n_tiles = INTER // BLOCK_H
    experts, counts, blocks, tile_end, block_end = expert_table(
        counts_ptr, E_LOCAL, E_PAD, BLOCK_M, n_tiles)
    total = tl.sum(blocks * n_tiles, axis=0)
    ks = tl.arange(0, BLOCK_K)
    for t in range(tl.program_id(0), total, NUM_PROGS):
        expert, count, first_block, m_block, n_tile = locate_tile(
            t, experts, counts, blocks, tile_end, block_end, n_tiles)
        expert = expert.to(tl.int64)

        # Gather this block's token rows; rows past the expert's count read token 0 and are
        # never used (their results land in padding rows).
        rows = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
        pair = tl.load(lists_ptr + expert * num_tokens + rows, mask=rows < count, other=0)
        token = (pair // TOPK).to(tl.int64)
        cols = n_tile * BLOCK_H + tl.arange(0, BLOCK_H)  # up rows of W1; gate rows are +INTER

        a_ptrs = x_ptr + token[:, None] * stride_xt + ks[None, :]
        up_ptrs = w_ptr + expert * stride_we + cols[None, :] * stride_wn + ks[:, None] * stride_wk
        gate_ptrs = up_ptrs + INTER * stride_wn
        sa_ptrs = xs_ptr + token * stride_xst
        su_ptr = ws_ptr + expert * stride_wse + (n_tile * BLOCK_H // 128) * stride_wsn
        sg_ptr = ws_ptr + expert * stride_wse + ((INTER + n_tile * BLOCK_H) // 128) * stride_wsn

        # Main loop (the time): one 128-wide K block per step, both halves share the A tile.
        acc_up = tl.zeros([BLOCK_M, BLOCK_H], dtype=tl.float32)
        acc_gate = tl.zeros([BLOCK_M, BLOCK_H], dtype=tl.float32)
        for kb in range(0, HIDDEN // BLOCK_K):
            a = tl.load(a_ptrs)
            b_up = tl.load(up_ptrs)
            b_gate = tl.load(gate_ptrs)
            sa = tl.load(sa_ptrs + kb * stride_xsb)
            su = tl.load(su_ptr + kb * stride_wsk)
            sg = tl.load(sg_ptr + kb * stride_wsk)
            acc_up += tl.dot(a, b_up) * (sa[:, None] * su)
            acc_gate += tl.dot(a, b_gate) * (sa[:, None] * sg)
            a_ptrs += BLOCK_K
            up_ptrs += BLOCK_K * stride_wk
            gate_ptrs += BLOCK_K * stride_wk

        # Epilogue: SwiGLU, then e4m3 with one scale per row of this BLOCK_H-wide block.
        h = acc_gate * tl.sigmoid(acc_gate) * acc_up
        scale = tl.maximum(tl.max(tl.abs(h), axis=1), 1e-20) / 448.0  # 448: e4m3's largest
        hq = round_to_e4m3(h / scale[:, None]).to(tl.float8e4nv)
        prow = ((first_block + m_block) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        tl.store(hq_ptr + prow[:, None] * stride_hq + cols[None, :], hq)
        tl.store(hs_ptr + prow * stride_hs + n_tile, scale)


@triton.jit
def _gemm2_kernel(
    hq_ptr, hs_ptr, w_ptr, ws_ptr, counts_ptr, lists_ptr, weights_ptr, y_ptr,
    num_tokens,
    stride_hq, stride_hs,
    stride_we, stride_wn, stride_wk,
    stride_wse, stride_wsn, stride_wsk,
    stride_y,
    HIDDEN: tl.constexpr, INTER: tl.constexpr,
    E_LOCAL: tl.constexpr, E_PAD: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    NUM_PROGS: tl.constexpr,
):
    n_tiles = HIDDEN // BLOCK_N
    experts, counts, blocks, tile_end, block_end = expert_table(
        counts_ptr, E_LOCAL, E_PAD, BLOCK_M, n_tiles)
    total = tl.sum(blocks * n_tiles, axis=0)
    ks = tl.arange(0, BLOCK_K)
    for t in range(tl.program_id(0), total, NUM_PROGS):
        expert, count, first_block, m_block, n_tile = locate_tile(
            t, experts, counts, blocks, tile_end, block_end, n_tiles)
        expert = expert.to(tl.int64)
        prow = ((first_block + m_block) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        cols = n_tile * BLOCK_N + tl.arange(0, BLOCK_N)

        a_ptrs = hq_ptr + prow[:, None] * stride_hq + ks[None, :]
        b_ptrs = w_ptr + expert * stride_we + cols[None, :] * stride_wn + ks[:, None] * stride_wk
        sa_ptrs = hs_ptr + prow * stride_hs
        sb_ptr = ws_ptr + expert * stride_wse + (n_tile * BLOCK_N // 128) * stride_wsn

        # Main loop: K steps of BLOCK_K (the width of h's scale blocks, <= 128, so each step
        # sits inside one 128-wide weight-scale block).
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for kb in range(0, INTER // BLOCK_K):
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
            sa = tl.load(sa_ptrs + kb)
            sb = tl.load(sb_ptr + (kb * BLOCK_K // 128) * stride_wsk)
            acc += tl.dot(a, b) * (sa[:, None] * sb)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * stride_wk

        # Epilogue: routing weight per row, bf16, real rows only.
        rows = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
        valid = rows < count
        pair = tl.load(lists_ptr + expert * num_tokens + rows, mask=valid, other=0)
        weight = tl.load(weights_ptr + pair, mask=valid, other=0.0)
        out = (acc * weight[:, None]).to(tl.bfloat16)
        tl.store(y_ptr + prow[:, None] * stride_y + cols[None, :], out, mask=valid[:, None])


def gemm1_swiglu(
    hidden_states: torch.Tensor,
    hidden_states_scale: torch.Tensor,
    gemm1_weights: torch.Tensor,
    gemm1_weights_scale: torch.Tensor,
    routing: Routing,
    config: TileConfig,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (h in e4m3 [rows, I], its scales [rows, I / block_h]) over the padded rows."""
    num_tokens, hidden = hidden_states.shape
    num_local, two_inter, _ = gemm1_weights.shape
    inter = two_inter // 2
    blocks = block_bound(num_tokens, num_local, TOP_K, config.block_m)
    rows = blocks * config.block_m
    dev = hidden_states.device
    hq = torch.empty((rows, inter), dtype=torch.float8_e4m3fn, device=dev)
    hs = torch.empty((rows, inter // config.block_h), dtype=torch.float32, device=dev)
    progs = num_programs(dev, config, blocks * (inter // config.block_h))
    x = hidden_states.contiguous()
    _gemm1_swiglu_kernel[(progs,)](
        x, hidden_states_scale, gemm1_weights, gemm1_weights_scale,
        routing.counts, routing.lists, hq, hs,
        num_tokens,
        x.stride(0), *hidden_states_scale.stride(),
        *gemm1_weights.stride(), *gemm1_weights_scale.stride(),
        hq.stride(0), hs.stride(0),
        HIDDEN=hidden, INTER=inter,
        E_LOCAL=num_local, E_PAD=triton.next_power_of_2(num_local), TOPK=TOP_K,
        BLOCK_M=config.block_m, BLOCK_H=config.block_h, BLOCK_K=SCALE_BLOCK,
        NUM_PROGS=progs,
        num_warps=config.warps1, num_stages=config.stages1,
    )
    return hq, hs


def gemm2_weighted(
    hq: torch.Tensor,
    hs: torch.Tensor,
    gemm2_weights: torch.Tensor,
    gemm2_weights_scale: torch.Tensor,
    routing: Routing,
    config: TileConfig,
) -> torch.Tensor:
    """Return y [rows, H] bf16: each pair's expert output times its routing weight."""
    num_local, hidden, inter = gemm2_weights.shape
    num_tokens = routing.topk_ids.shape[0]
    rows = hq.shape[0]
    blocks = rows // config.block_m
    y = torch.empty((rows, hidden), dtype=torch.bfloat16, device=hq.device)
    progs = num_programs(hq.device, config, blocks * (hidden // config.block_n2))
    _gemm2_kernel[(progs,)](
        hq, hs, gemm2_weights, gemm2_weights_scale,
        routing.counts, routing.lists, routing.topk_weights, y,
        num_tokens,
        hq.stride(0), hs.stride(0),
        *gemm2_weights.stride(), *gemm2_weights_scale.stride(),
        y.stride(0),
        HIDDEN=hidden, INTER=inter,
        E_LOCAL=num_local, E_PAD=triton.next_power_of_2(num_local),
        BLOCK_M=config.block_m, BLOCK_N=config.block_n2, BLOCK_K=config.block_h,
        NUM_PROGS=progs,
        num_warps=config.warps2, num_stages=config.stages2,
    )
    return y
