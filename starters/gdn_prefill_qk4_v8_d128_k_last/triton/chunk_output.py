"""Stage 3 of the chunked gated delta rule: every chunk's outputs, all chunks in parallel.

With S0 the state entering the chunk (saved by stage 2) and U the chunk's delta-rule
corrections, the outputs of the chunk's C tokens are

    O = scale * (gamma * (Q S0^T) + P U),   P[t, s] = (q_t . k_s) gamma_t / gamma_s for s <= t

(the first term reads what the state held before the chunk, the second what the chunk itself
wrote, decayed to token t). Nothing here depends on another chunk, so one program per (chunk,
value head, block of BLOCK_V output columns) runs with no ordering at all.

Where the time goes: Q K^T (C x C x K), Q S0^T (C x K x BLOCK_V) and P U (C x C x BLOCK_V) on
tensor cores, and reading S0 (bf16 by default, BLOCK_V x K) and U (fp32). H200, T = 8192 in
32 sequences: 55 us, for ~106 MB moved (~22 us at the copy bandwidth).

Tried: one program for both value heads of a query head (Q K^T and the loads of Q and K
shared): 255 registers; 5-7% slower at T = 8192, 26% slower at T = 3028 in 5 sequences, 2%
faster at T = 5709 in 2.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .chunk_prep import locate_chunk


@triton.jit
def chunk_output(
    pid, i_h, i_v,
    q_ptr, k_ptr, u_ptr, g_ptr, h_ptr, cu_ptr,
    out_ptr,
    num_seqs,
    scale,
    stride_q_t, stride_q_h, stride_k_t, stride_k_h,
    stride_u_t, stride_u_h, stride_g_t,
    stride_h_c, stride_h_h,
    stride_o_t, stride_o_h,
    GROUP: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNK: tl.constexpr,
    F32_DOT: tl.constexpr,
    NATIVE_BF16: tl.constexpr,
    S0_BF16: tl.constexpr,
    LOAD_CACHE: tl.constexpr,
):
    # --- which chunk, head and output columns ------------------------------------------------
    i_qk = i_h // GROUP
    seq, start, eos = locate_chunk(cu_ptr, num_seqs, pid, CHUNK, BLOCK_N)
    if seq < num_seqs:  # surplus items (the host's upper bound) do nothing
        offs_k = tl.arange(0, BLOCK_K)
        offs_v = i_v * BLOCK_V + tl.arange(0, BLOCK_V)
        mask_k = offs_k < K
        mask_v = offs_v < V
        r = tl.arange(0, CHUNK)
        rows = start + r
        m_t = rows < eos
        m_tk = m_t[:, None] & mask_k[None, :]
        m_tv = m_t[:, None] & mask_v[None, :]

        # --- inputs: this chunk's q, k, decay and corrections, and the state it started from -----
        qc = tl.load(q_ptr + rows[:, None] * stride_q_t + i_qk * stride_q_h + offs_k[None, :],
                     mask=m_tk, other=0.0)
        kc = tl.load(k_ptr + rows[:, None] * stride_k_t + i_qk * stride_k_h + offs_k[None, :],
                     mask=m_tk, other=0.0)
        gc = tl.load(g_ptr + rows * stride_g_t + i_h, mask=m_t, other=0.0,
                     cache_modifier=LOAD_CACHE)
        uc = tl.load(u_ptr + rows[:, None] * stride_u_t + i_h * stride_u_h + offs_v[None, :],
                     mask=m_tv, other=0.0, cache_modifier=LOAD_CACHE).to(tl.float32)
        s0 = tl.load(h_ptr + pid.to(tl.int64) * stride_h_c + i_h * stride_h_h
                     + offs_v[:, None] * K + offs_k[None, :],
                     mask=mask_v[:, None] & mask_k[None, :], other=0.0,
                     cache_modifier=LOAD_CACHE)

        # --- O = scale * (gamma * Q S0^T + P U) --------------------------------------------------
        # Q K^T has exact products (bf16 values): bf16 operands on the GPU; fp32 operands in tf32
        # (which holds them exactly) in Triton's CPU interpreter, which mis-multiplies bf16 tiles.
        # Q S0^T likewise uses bf16 operands when the saved states are bf16.
        if NATIVE_BF16:
            qk = tl.dot(qc, tl.trans(kc))
        else:
            qk = tl.dot(qc.to(tl.float32), tl.trans(kc.to(tl.float32)), input_precision="tf32")
        causal = r[:, None] >= r[None, :]
        p = tl.where(causal, qk * tl.exp(tl.where(causal, gc[:, None] - gc[None, :], 0.0)), 0.0)
        if S0_BF16:
            qs = tl.dot(qc, tl.trans(s0))
        else:
            qs = tl.dot(qc.to(tl.float32), tl.trans(s0.to(tl.float32)), input_precision=F32_DOT)
        o = scale * (tl.exp(gc)[:, None] * qs + tl.dot(p, uc, input_precision=F32_DOT))
        tl.store(out_ptr + rows[:, None] * stride_o_t + i_h * stride_o_h + offs_v[None, :],
                 o.to(out_ptr.dtype.element_ty), mask=m_tv)
