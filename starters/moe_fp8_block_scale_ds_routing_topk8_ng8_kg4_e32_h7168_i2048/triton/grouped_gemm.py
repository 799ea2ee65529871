"""The two grouped FP8 GEMMs over the local experts, with the 128 x 128 block scales.

GEMM1 (per expert, its tokens' rows): G = x @ W1^T, split as up = G[:, :I], gate = G[:, I:];
its epilogue applies SwiGLU, h = silu(gate) * up, and re-quantises h to e4m3 with one scale per
row and BLOCK_H columns, so that GEMM2 also runs on FP8 tensor cores.
GEMM2: y = h @ W2^T, times the pair's routing weight, stored at the pair's padded row.

Both K loops step one scale block at a time: the FP8 dot of the step is exact products summed
by the tensor core, then multiplied by (activation scale per row) x (weight scale of the tile)
and added to an fp32 accumulator.

Split K (SPLIT1, SPLIT2 > 1): at a few tokens only one or two experts are active, and their
tiles alone would leave most SMs idle while the call is bound by reading those experts' weights.
Each tile's K range is then cut into SPLIT parts on separate programs. GEMM1's parts go to fp32
scratch and ``reduce1_phase`` sums them before the (non-linear) SwiGLU; GEMM2's parts stay
apart in y [SPLIT2, rows, H] and the combine step, which sums rows anyway, adds them.

Where the time goes: the K loops (HBM reads of the weight tiles at small T, tensor-core work
at large T); the epilogues are a small fraction.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .schedule import expert_table, locate_tile, round_to_e4m3


@triton.jit
def _swiglu_quantise_store(acc_up, acc_gate, hq_ptr, hs_ptr, prow, cols, n_tile,
                           stride_hq, stride_hs):
    """h = silu(gate) * up, then e4m3 with one scale per row of this BLOCK_H-wide block."""
    h = acc_gate * tl.sigmoid(acc_gate) * acc_up
    scale = tl.maximum(tl.max(tl.abs(h), axis=1), 1e-20) / 448.0  # 448: e4m3's largest
    hq = round_to_e4m3(h / scale[:, None]).to(tl.float8e4nv)
    tl.store(hq_ptr + prow[:, None] * stride_hq + cols[None, :], hq)
    tl.store(hs_ptr + prow * stride_hs + n_tile, scale)


@triton.jit
def gemm1_phase(
    pid, num_programs,
    x_ptr, xs_ptr, w_ptr, ws_ptr, counts_ptr, lists_ptr, hq_ptr, hs_ptr, part_ptr,
    num_tokens, rows_total,
    stride_xt, stride_xsb, stride_xst,
    stride_we, stride_wn, stride_wk,
    stride_wse, stride_wsn, stride_wsk,
    stride_hq, stride_hs,
    HIDDEN: tl.constexpr, INTER: tl.constexpr,
    E_LOCAL: tl.constexpr, E_PAD: tl.constexpr, TOPK: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr,
    SPLIT: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    """GEMM1 tiles t = pid, pid + num_programs, ...; SPLIT == 1 finishes h, else fp32 parts."""
    n_tiles = INTER // BLOCK_H
    K_STEPS: tl.constexpr = HIDDEN // BLOCK_K // SPLIT
    experts, counts, blocks, tile_end, block_end = expert_table(
        counts_ptr, E_LOCAL, E_PAD, BLOCK_M, n_tiles * SPLIT)
    total = tl.sum(blocks * n_tiles * SPLIT, axis=0)
    ks = tl.arange(0, BLOCK_K)
    for t in range(pid, total, num_programs):
        expert, count, first_block, m_block, sub = locate_tile(
            t, experts, counts, blocks, tile_end, block_end, n_tiles * SPLIT)
        n_tile = sub // SPLIT
        k0 = (sub % SPLIT) * K_STEPS
        expert = expert.to(tl.int64)

        # Gather this block's token rows; rows past the expert's count read token 0 and are
        # never used (their results land in padding rows).
        rows = m_block * BLOCK_M + tl.arange(0, BLOCK_M)
        pair = tl.load(lists_ptr + expert * num_tokens + rows, mask=rows < count, other=0,
                       cache_modifier=".cg")
        token = (pair // TOPK).to(tl.int64)
        cols = n_tile * BLOCK_H + tl.arange(0, BLOCK_H)  # up rows of W1; gate rows are +INTER

        a_ptrs = x_ptr + token[:, None] * stride_xt + (k0 * BLOCK_K + ks)[None, :]
        up_ptrs = (w_ptr + expert * stride_we + cols[None, :] * stride_wn
                   + (k0 * BLOCK_K + ks)[:, None] * stride_wk)
        gate_ptrs = up_ptrs + INTER * stride_wn
        sa_ptrs = xs_ptr + token * stride_xst
        su_ptr = ws_ptr + expert * stride_wse + (n_tile * BLOCK_H // 128) * stride_wsn
        sg_ptr = ws_ptr + expert * stride_wse + ((INTER + n_tile * BLOCK_H) // 128) * stride_wsn

        # Main loop (the time): one 128-wide K block per step, both halves share the A tile.
        acc_up = tl.zeros([BLOCK_M, BLOCK_H], dtype=tl.float32)
        acc_gate = tl.zeros([BLOCK_M, BLOCK_H], dtype=tl.float32)
        for i in tl.range(0, K_STEPS, num_stages=NUM_STAGES):  # a constant trip count
            kb = k0 + i
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

        prow = ((first_block + m_block) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        if SPLIT == 1:
            _swiglu_quantise_store(acc_up, acc_gate, hq_ptr, hs_ptr, prow, cols, n_tile,
                                   stride_hq, stride_hs)
        else:  # part [SPLIT, rows_total, 2 * INTER] fp32: up at cols, gate at INTER + cols
            part = part_ptr + ((sub % SPLIT) * rows_total + prow)[:, None] * (2 * INTER)
            tl.store(part + cols[None, :], acc_up)
            tl.store(part + INTER + cols[None, :], acc_gate)


@triton.jit
def reduce1_phase(
    pid, num_programs,
    counts_ptr, part_ptr, hq_ptr, hs_ptr, rows_total, stride_hq, stride_hs,
    INTER: tl.constexpr, E_LOCAL: tl.constexpr, E_PAD: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr, SPLIT: tl.constexpr,
):
    """Split-K GEMM1 only: sum the SPLIT parts of each (padded block, N tile), then SwiGLU."""
    n_tiles = INTER // BLOCK_H
    experts = tl.arange(0, E_PAD)
    counts = tl.load(counts_ptr + experts, mask=experts < E_LOCAL, other=0, cache_modifier=".cg")
    total_blocks = tl.sum((counts + BLOCK_M - 1) // BLOCK_M, axis=0)
    for item in range(pid, total_blocks * n_tiles, num_programs):
        n_tile = item % n_tiles
        prow = ((item // n_tiles) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        cols = n_tile * BLOCK_H + tl.arange(0, BLOCK_H)
        acc_up = tl.zeros([BLOCK_M, BLOCK_H], dtype=tl.float32)
        acc_gate = tl.zeros([BLOCK_M, BLOCK_H], dtype=tl.float32)
        for s in tl.static_range(SPLIT):
            part = part_ptr + (s * rows_total + prow)[:, None] * (2 * INTER)
            acc_up += tl.load(part + cols[None, :], cache_modifier=".cg")
            acc_gate += tl.load(part + INTER + cols[None, :], cache_modifier=".cg")
        _swiglu_quantise_store(acc_up, acc_gate, hq_ptr, hs_ptr, prow, cols, n_tile,
                               stride_hq, stride_hs)


@triton.jit
def gemm2_phase(
    pid, num_programs,
    hq_ptr, hs_ptr, w_ptr, ws_ptr, counts_ptr, lists_ptr, weights_ptr, y_ptr, prow_ptr,
    hq_desc, w_desc,
    num_tokens, rows_total,
    stride_hq, stride_hs,
    stride_we, stride_wn, stride_wk,
    stride_wse, stride_wsn, stride_wsk,
    HIDDEN: tl.constexpr, INTER: tl.constexpr,
    E_LOCAL: tl.constexpr, E_PAD: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_M2: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SPLIT: tl.constexpr, NUM_STAGES: tl.constexpr, TMA: tl.constexpr,
):
    """GEMM2 tiles: y[split, padded row] = weight * (h @ W2^T over the split's K range).

    Tiles are BLOCK_M2 rows, a divisor of the BLOCK_M blocks the padded rows come in (so a
    separately launched GEMM2 may take thinner tiles than GEMM1), and only those holding an
    expert's real rows are computed. With TMA, h and W2 tiles arrive through the tensor
    descriptors ``hq_desc`` ([rows, I]) and ``w_desc`` (W2 as [E * H, I]) instead of pointers.

    Also records each local pair's padded row in prow (by the tiles of N tile 0, split 0), so
    the combine step needs neither the counts nor the lists.
    """
    n_tiles = HIDDEN // BLOCK_N
    K_STEPS: tl.constexpr = INTER // BLOCK_K // SPLIT
    experts, counts, blocks, tile_end, block_end = expert_table(
        counts_ptr, E_LOCAL, E_PAD, BLOCK_M2, n_tiles * SPLIT)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M  # rows each expert owns in h and y
    padded_start = tl.cumsum(padded, axis=0) - padded
    total = tl.sum(blocks * n_tiles * SPLIT, axis=0)
    ks = tl.arange(0, BLOCK_K)
    for t in range(pid, total, num_programs):
        expert, count, _, m_block, sub = locate_tile(
            t, experts, counts, blocks, tile_end, block_end, n_tiles * SPLIT)
        n_tile = sub // SPLIT
        split = sub % SPLIT
        k0 = split * K_STEPS
        row0 = tl.sum(tl.where(experts == expert, padded_start, 0), axis=0) + m_block * BLOCK_M2
        expert = expert.to(tl.int64)
        prow = (row0 + tl.arange(0, BLOCK_M2)).to(tl.int64)
        cols = n_tile * BLOCK_N + tl.arange(0, BLOCK_N)

        a_ptrs = hq_ptr + prow[:, None] * stride_hq + (k0 * BLOCK_K + ks)[None, :]
        b_ptrs = (w_ptr + expert * stride_we + cols[None, :] * stride_wn
                  + (k0 * BLOCK_K + ks)[:, None] * stride_wk)
        w_row = expert.to(tl.int32) * HIDDEN + n_tile * BLOCK_N  # TMA: W2's row in [E * H, I]
        sa_ptrs = hs_ptr + prow * stride_hs
        sb_ptr = ws_ptr + expert * stride_wse + (n_tile * BLOCK_N // 128) * stride_wsn

        # Main loop: K steps of BLOCK_K (the width of h's scale blocks, <= 128, so each step
        # sits inside one 128-wide weight-scale block). h was written by other programs.
        acc = tl.zeros([BLOCK_M2, BLOCK_N], dtype=tl.float32)
        for i in tl.range(0, K_STEPS, num_stages=NUM_STAGES):
            kb = k0 + i
            if TMA:
                a = hq_desc.load([row0, kb * BLOCK_K])
                b = w_desc.load([w_row, kb * BLOCK_K]).T
            else:
                a = tl.load(a_ptrs, cache_modifier=".cg")
                b = tl.load(b_ptrs)
            sa = tl.load(sa_ptrs + kb, cache_modifier=".cg")
            sb = tl.load(sb_ptr + (kb * BLOCK_K // 128) * stride_wsk)
            acc += tl.dot(a, b) * (sa[:, None] * sb)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * stride_wk

        # Epilogue: routing weight per row, real rows only (y's dtype rounds on store).
        rows = m_block * BLOCK_M2 + tl.arange(0, BLOCK_M2)
        valid = rows < count
        pair = tl.load(lists_ptr + expert * num_tokens + rows, mask=valid, other=0,
                       cache_modifier=".cg")
        weight = tl.load(weights_ptr + pair, mask=valid, other=0.0, cache_modifier=".cg")
        out = acc * weight[:, None]
        y_rows = split * rows_total + prow
        tl.store(y_ptr + y_rows[:, None] * HIDDEN + cols[None, :], out, mask=valid[:, None])
        first = (rows * 0 + sub) == 0  # a vector: the interpreter rejects scalar masks here
        tl.store(prow_ptr + pair, prow.to(tl.int32), mask=valid & first)
