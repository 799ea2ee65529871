"""Stage 1 of the chunked gated delta rule: everything that does not depend on the state.

Inside one chunk of C = 64 tokens (a sequence's tokens cut into consecutive 64-token pieces; the
last piece may be shorter), write gamma_t = g_1 * ... * g_t for the decay accumulated since the
chunk began and S0 for the state entering the chunk (k-last, [V, K]). Unrolling the recurrence
over the chunk gives, for the delta-rule corrections u_t (one row per token):

    u_t + beta_t * sum_{s<t} (gamma_t / gamma_s) (k_t . k_s) u_s = beta_t v_t - beta_t gamma_t S0 k_t

i.e. (I + A) U = diag(beta) V - diag(beta * gamma) K S0^T with A strictly lower triangular. With
T = (I + A)^-1 this is U = U~ - W S0^T where

    W  = T diag(beta * gamma) K      [C, K]      U~ = T diag(beta) V      [C, V]

Both depend only on the chunk's own inputs, so every (chunk, head) pair is computed in parallel
here; stage 2 (chunk_scan.py) walks each sequence's chunks in order doing only the two
state-dependent matmuls, and stage 3 (chunk_output.py) the outputs. This kernel also stores
the in-chunk log decay log(gamma_t).

Where the time goes: ten 16x16x128 K.K^T blocks (tensor cores), the 64x64 inverse, and
twenty 16x16x128 products for W and U~; then 2 x C x 128 fp32 stores per token-head. The inverse
is done blockwise with small matmuls only: each 16x16 diagonal block by a short product
formula, the off-diagonal blocks by T_ij = -T_ii sum_m A_im T_mj.
"""

from __future__ import annotations

import triton
import triton.language as tl

CHUNK = 64  # tokens per chunk (4 blocks of 16: the smallest tile a tensor-core dot accepts)
SUB = 16


@triton.jit
def softplus(x):
    # Same cut-over as torch.nn.functional.softplus (beta=1, threshold=20): linear above 20.
    return tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))


@triton.jit
def locate_chunk(cu_ptr, num_seqs, pid, CHUNK: tl.constexpr, BLOCK_N: tl.constexpr):
    """Map a flat chunk number to (sequence, first token, end token) without a host sync.

    Sequence i owns ceil(len_i / CHUNK) chunks; the chunks of all sequences are numbered in
    order. The host only knows the upper bound ceil(T / CHUNK) + N on their count, so programs
    past the real total get sequence index >= num_seqs and the caller exits.
    """
    idx = tl.arange(0, BLOCK_N)
    valid = idx < num_seqs
    starts = tl.load(cu_ptr + idx, mask=valid, other=0).to(tl.int64)
    ends = tl.load(cu_ptr + idx + 1, mask=valid, other=0).to(tl.int64)
    n_chunks = (ends - starts + CHUNK - 1) // CHUNK
    done = tl.cumsum(n_chunks, 0)  # chunks up to and including sequence i
    seq = tl.sum((done <= pid).to(tl.int32), 0)
    here = idx == seq
    first = tl.sum(tl.where(here, done - n_chunks, 0), 0)
    bos = tl.sum(tl.where(here, starts, 0), 0)
    eos = tl.sum(tl.where(here, ends, 0), 0)
    start = bos + (pid - first) * CHUNK
    return seq, start, eos


@triton.jit
def _load_block(
    k_ptr, a_ptr, b_ptr, row0, eos, i_h, i_qk, a_log, dt_bias,
    stride_k_t, stride_k_h, stride_a_t, stride_b_t,
    K: tl.constexpr, BLOCK_K: tl.constexpr, SUB: tl.constexpr,
):
    """Keys [SUB, BLOCK_K] (bf16), log-decay and beta [SUB] of one 16-token block.

    Rows past the sequence end come back as zero keys, zero log-decay and zero beta: they then
    contribute nothing to A, W or U~, which is how short chunks are handled.
    """
    rows = row0 + tl.arange(0, SUB)
    m_t = rows < eos
    offs_k = tl.arange(0, BLOCK_K)
    kb = tl.load(
        k_ptr + rows[:, None] * stride_k_t + i_qk * stride_k_h + offs_k[None, :],
        mask=m_t[:, None] & (offs_k[None, :] < K),
        other=0.0,
    )
    a = tl.load(a_ptr + rows * stride_a_t + i_h, mask=m_t, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + rows * stride_b_t + i_h, mask=m_t, other=0.0).to(tl.float32)
    log_g = tl.where(m_t, -tl.exp(a_log) * softplus(a + dt_bias), 0.0)
    beta = tl.where(m_t, tl.sigmoid(b), 0.0)
    return kb, log_g, beta


@triton.jit
def _a_block(ki, kj, beta_i, gi, gj, DIAG: tl.constexpr, SUB: tl.constexpr,
             NATIVE_BF16: tl.constexpr):
    """Block (i, j) of A: beta_t (gamma_t / gamma_s) (k_t . k_s), strictly lower when DIAG."""
    # Products of bf16 values are exact in fp32, so K K^T is exact either way: bf16 operands
    # on the GPU, or (Triton's CPU interpreter mis-multiplies bf16 tiles) fp32 operands in tf32,
    # which holds bf16 values exactly.
    if NATIVE_BF16:
        kk = tl.dot(ki, tl.trans(kj))
    else:
        kk = tl.dot(ki.to(tl.float32), tl.trans(kj.to(tl.float32)), input_precision="tf32")
    diff = gi[:, None] - gj[None, :]
    if DIAG:
        r = tl.arange(0, SUB)
        lower = r[:, None] > r[None, :]
        # Mask before exp: above the diagonal the exponent is positive and could overflow.
        return tl.where(lower, beta_i[:, None] * kk * tl.exp(tl.where(lower, diff, 0.0)), 0.0)
    return beta_i[:, None] * kk * tl.exp(diff)  # i > j: diff <= 0, decays are <= 1


@triton.jit
def _mm(x, y):
    # Small fp32 products of the inverse: exact fp32 on CUDA cores (ieee), they are 16x16x16.
    return tl.dot(x, y, input_precision="ieee")


@triton.jit
def _invert_unit_lower(a, SUB: tl.constexpr):
    """(I + a)^-1 for strictly lower-triangular a [16, 16], with six small matmuls.

    a^16 = 0, so (I + a)^-1 = (I - a)(I + a^2)(I + a^4)(I + a^8) exactly. Register-level
    forward substitution would need 15 dependent steps, each a cross-warp reduction. The
    product form is safe at this size: with unit keys |a| <= 1, and even for identical keys
    the largest power entry is C(14, 7) = 3432, a ~2e-4 relative rounding error in fp32;
    over a whole 64-token chunk the same trick would cancel catastrophically.
    """
    r = tl.arange(0, SUB)
    eye = (r[:, None] == r[None, :]).to(tl.float32)
    x = eye - a
    p = _mm(a, a)  # a^2
    x = _mm(x, eye + p)
    p = _mm(p, p)  # a^4
    x = _mm(x, eye + p)
    p = _mm(p, p)  # a^8
    return _mm(x, eye + p)


@triton.jit
def _store_rows(
    w_ptr, u_ptr, k_ptr, v_ptr, row0, eos, i_h, i_qk,
    t0, t1, t2, t3, be0, be1, be2, be3, bg0, bg1, bg2, bg3,
    stride_k_t, stride_k_h, stride_v_t, stride_v_h,
    stride_w_t, stride_w_h, stride_u_t, stride_u_h,
    K: tl.constexpr, V: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
    SUB: tl.constexpr, NB: tl.constexpr, F32_DOT: tl.constexpr,
):
    """W and U~ rows of one 16-token block: sum over the blocks j <= i of T_ij @ (...)_j.

    t0..t3 are the blocks T_i0..T_i3 of this block row (NB says how many count; the rest are
    placeholders); be0..be3 and bg0..bg3 are beta and beta * gamma of the source blocks.
    """
    offs_k = tl.arange(0, BLOCK_K)
    offs_v = tl.arange(0, BLOCK_V)
    w = tl.zeros([SUB, BLOCK_K], dtype=tl.float32)
    u = tl.zeros([SUB, BLOCK_V], dtype=tl.float32)
    for j in tl.static_range(NB):
        if j == 0:
            t, beta_j, bg_j = t0, be0, bg0
        elif j == 1:
            t, beta_j, bg_j = t1, be1, bg1
        elif j == 2:
            t, beta_j, bg_j = t2, be2, bg2
        else:
            t, beta_j, bg_j = t3, be3, bg3
        src = row0 - (NB - 1 - j) * SUB + tl.arange(0, SUB)
        m_src = src < eos
        kj = tl.load(
            k_ptr + src[:, None] * stride_k_t + i_qk * stride_k_h + offs_k[None, :],
            mask=m_src[:, None] & (offs_k[None, :] < K),
            other=0.0,
        ).to(tl.float32)
        vj = tl.load(
            v_ptr + src[:, None] * stride_v_t + i_h * stride_v_h + offs_v[None, :],
            mask=m_src[:, None] & (offs_v[None, :] < V),
            other=0.0,
        ).to(tl.float32)
        w += tl.dot(t, kj * bg_j[:, None], input_precision=F32_DOT)
        u += tl.dot(t, vj * beta_j[:, None], input_precision=F32_DOT)
    rows = row0 + tl.arange(0, SUB)
    m_t = rows < eos
    tl.store(
        w_ptr + rows[:, None] * stride_w_t + i_h * stride_w_h + offs_k[None, :],
        w.to(w_ptr.dtype.element_ty),
        mask=m_t[:, None] & (offs_k[None, :] < K),
    )
    tl.store(
        u_ptr + rows[:, None] * stride_u_t + i_h * stride_u_h + offs_v[None, :],
        u,
        mask=m_t[:, None] & (offs_v[None, :] < V),
    )


@triton.jit
def chunk_prep(
    pid, i_h,
    k_ptr, v_ptr, a_ptr, b_ptr, a_log_ptr, dt_bias_ptr, cu_ptr,
    w_ptr, u_ptr, g_ptr,
    num_seqs,
    stride_k_t, stride_k_h, stride_v_t, stride_v_h,
    stride_a_t, stride_b_t,
    stride_w_t, stride_w_h, stride_u_t, stride_u_h, stride_g_t,
    NUM_V_HEADS: tl.constexpr,
    GROUP: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNK: tl.constexpr,
    SUB: tl.constexpr,
    F32_DOT: tl.constexpr,
    NATIVE_BF16: tl.constexpr,
):
    # --- which chunk and head ------------------------------------------------------------------
    i_qk = i_h // GROUP
    seq, start, eos = locate_chunk(cu_ptr, num_seqs, pid, CHUNK, BLOCK_N)
    if seq < num_seqs:  # surplus items (the host's upper bound) do nothing
        a_log = tl.load(a_log_ptr + i_h).to(tl.float32)
        dt_bias = tl.load(dt_bias_ptr + i_h).to(tl.float32)

        # --- keys and gates of the four 16-token blocks; in-chunk cumulative log decay ------------
        k0, lg0, be0 = _load_block(k_ptr, a_ptr, b_ptr, start, eos, i_h, i_qk, a_log, dt_bias,
                                   stride_k_t, stride_k_h, stride_a_t, stride_b_t, K, BLOCK_K, SUB)
        k1, lg1, be1 = _load_block(k_ptr, a_ptr, b_ptr, start + SUB, eos, i_h, i_qk, a_log, dt_bias,
                                   stride_k_t, stride_k_h, stride_a_t, stride_b_t, K, BLOCK_K, SUB)
        k2, lg2, be2 = _load_block(k_ptr, a_ptr, b_ptr, start + 2 * SUB, eos, i_h, i_qk, a_log,
                                   dt_bias, stride_k_t, stride_k_h, stride_a_t, stride_b_t, K,
                                   BLOCK_K, SUB)
        k3, lg3, be3 = _load_block(k_ptr, a_ptr, b_ptr, start + 3 * SUB, eos, i_h, i_qk, a_log,
                                   dt_bias, stride_k_t, stride_k_h, stride_a_t, stride_b_t, K,
                                   BLOCK_K, SUB)
        g0 = tl.cumsum(lg0, 0)
        g1 = tl.cumsum(lg1, 0) + tl.sum(lg0, 0)
        g2 = tl.cumsum(lg2, 0) + tl.sum(lg0, 0) + tl.sum(lg1, 0)
        g3 = tl.cumsum(lg3, 0) + tl.sum(lg0, 0) + tl.sum(lg1, 0) + tl.sum(lg2, 0)

        r = tl.arange(0, SUB)
        for blk in tl.static_range(4):
            if blk == 0:
                gb = g0
            elif blk == 1:
                gb = g1
            elif blk == 2:
                gb = g2
            else:
                gb = g3
            rows = start + blk * SUB + r
            tl.store(g_ptr + rows * stride_g_t + i_h, gb, mask=rows < eos)

        # --- A = strictly lower part of diag(beta) (K K^T * gamma_t / gamma_s), in 16x16 blocks --
        a00 = _a_block(k0, k0, be0, g0, g0, True, SUB, NATIVE_BF16)
        a11 = _a_block(k1, k1, be1, g1, g1, True, SUB, NATIVE_BF16)
        a22 = _a_block(k2, k2, be2, g2, g2, True, SUB, NATIVE_BF16)
        a33 = _a_block(k3, k3, be3, g3, g3, True, SUB, NATIVE_BF16)
        a10 = _a_block(k1, k0, be1, g1, g0, False, SUB, NATIVE_BF16)
        a20 = _a_block(k2, k0, be2, g2, g0, False, SUB, NATIVE_BF16)
        a21 = _a_block(k2, k1, be2, g2, g1, False, SUB, NATIVE_BF16)
        a30 = _a_block(k3, k0, be3, g3, g0, False, SUB, NATIVE_BF16)
        a31 = _a_block(k3, k1, be3, g3, g1, False, SUB, NATIVE_BF16)
        a32 = _a_block(k3, k2, be3, g3, g2, False, SUB, NATIVE_BF16)

        # --- T = (I + A)^-1: diagonal blocks by substitution, the rest by the block formula -------
        t00 = _invert_unit_lower(a00, SUB)
        t11 = _invert_unit_lower(a11, SUB)
        t22 = _invert_unit_lower(a22, SUB)
        t33 = _invert_unit_lower(a33, SUB)
        t10 = -_mm(t11, _mm(a10, t00))
        t21 = -_mm(t22, _mm(a21, t11))
        t20 = -_mm(t22, _mm(a20, t00) + _mm(a21, t10))
        t32 = -_mm(t33, _mm(a32, t22))
        t31 = -_mm(t33, _mm(a31, t11) + _mm(a32, t21))
        t30 = -_mm(t33, _mm(a30, t00) + _mm(a31, t10) + _mm(a32, t20))

        # --- W = T diag(beta gamma) K and U~ = T diag(beta) V, one 16-row block at a time ---------
        bg0 = be0 * tl.exp(g0)
        bg1 = be1 * tl.exp(g1)
        bg2 = be2 * tl.exp(g2)
        bg3 = be3 * tl.exp(g3)
        _store_rows(w_ptr, u_ptr, k_ptr, v_ptr, start, eos, i_h, i_qk,
                    t00, t00, t00, t00, be0, be0, be0, be0, bg0, bg0, bg0, bg0,
                    stride_k_t, stride_k_h, stride_v_t, stride_v_h,
                    stride_w_t, stride_w_h, stride_u_t, stride_u_h,
                    K, V, BLOCK_K, BLOCK_V, SUB, 1, F32_DOT)
        _store_rows(w_ptr, u_ptr, k_ptr, v_ptr, start + SUB, eos, i_h, i_qk,
                    t10, t11, t11, t11, be0, be1, be1, be1, bg0, bg1, bg1, bg1,
                    stride_k_t, stride_k_h, stride_v_t, stride_v_h,
                    stride_w_t, stride_w_h, stride_u_t, stride_u_h,
                    K, V, BLOCK_K, BLOCK_V, SUB, 2, F32_DOT)
        _store_rows(w_ptr, u_ptr, k_ptr, v_ptr, start + 2 * SUB, eos, i_h, i_qk,
                    t20, t21, t22, t22, be0, be1, be2, be2, bg0, bg1, bg2, bg2,
                    stride_k_t, stride_k_h, stride_v_t, stride_v_h,
                    stride_w_t, stride_w_h, stride_u_t, stride_u_h,
                    K, V, BLOCK_K, BLOCK_V, SUB, 3, F32_DOT)
        _store_rows(w_ptr, u_ptr, k_ptr, v_ptr, start + 3 * SUB, eos, i_h, i_qk,
                    t30, t31, t32, t33, be0, be1, be2, be3, bg0, bg1, bg2, bg3,
                    stride_k_t, stride_k_h, stride_v_t, stride_v_h,
                    stride_w_t, stride_w_h, stride_u_t, stride_u_h,
                    K, V, BLOCK_K, BLOCK_V, SUB, 4, F32_DOT)


def prep_grid(total_tokens: int, num_seqs: int, num_v_heads: int) -> tuple[int, int]:
    """Programs for stage 1: an upper bound on the chunk count (no host sync), times heads."""
    return triton.cdiv(total_tokens, CHUNK) + num_seqs, num_v_heads

