"""Stage 2 of the chunked gated delta rule: walk each sequence's chunks in order.

With W, U~ and the in-chunk log decay G = log(gamma) from stage 1, one chunk of C tokens turns
the incoming state S0 ([V, K], k-last) into outputs and the outgoing state with four matmuls:

    U   = U~ - W S0^T                                        delta-rule corrections [C, V]
    O   = scale * (gamma * (Q S0^T) + P U),                  outputs [C, V]
          P[t, s] = (q_t . k_s) gamma_t / gamma_s for s <= t, else 0
    S1  = gamma_C S0 + (U * gamma_C / gamma)^T K             state after the chunk [V, K]

One program owns one (sequence, value head, block of BLOCK_V state rows) and keeps that slice
of the state in registers for the whole sequence: it is read once from ``state`` and written
once to ``new_state``. Rows of the k-last state never interact, so slicing V is free
parallelism; it is what keeps the GPU busy when there are few, long sequences.

Where the time goes: per chunk, W S0^T and Q S0^T (C x K x BLOCK_V), Q K^T (C x C x K, bf16),
P U (C x C x BLOCK_V) and U^T K (BLOCK_V x C x K) on tensor cores, plus streaming W (fp32) and
U~ from stage 1. The chain from one chunk's state to the next is the sequential part.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def chunk_scan_kernel(
    q_ptr, k_ptr, w_ptr, u_ptr, g_ptr, cu_ptr, state_ptr,
    out_ptr, new_state_ptr,
    scale,
    stride_q_t, stride_q_h, stride_k_t, stride_k_h,
    stride_w_t, stride_w_h, stride_u_t, stride_u_h, stride_g_t,
    stride_o_t, stride_o_h,
    stride_s_n, stride_s_h, stride_ns_n, stride_ns_h,
    GROUP: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_V: tl.constexpr,
    CHUNK: tl.constexpr,
    HAS_STATE: tl.constexpr,
    F32_DOT: tl.constexpr,
):
    # --- which sequence, value head and state rows this program owns -------------------------
    i_n = tl.program_id(0).to(tl.int64)
    i_h = tl.program_id(1)
    i_v = tl.program_id(2)
    i_qk = i_h // GROUP
    bos = tl.load(cu_ptr + i_n).to(tl.int64)
    eos = tl.load(cu_ptr + i_n + 1).to(tl.int64)

    offs_k = tl.arange(0, BLOCK_K)
    offs_v = i_v * BLOCK_V + tl.arange(0, BLOCK_V)
    mask_k = offs_k < K
    mask_v = offs_v < V
    state_rows = offs_v[:, None] * K + offs_k[None, :]
    mask_s = mask_v[:, None] & mask_k[None, :]
    r = tl.arange(0, CHUNK)
    causal = r[:, None] >= r[None, :]

    # --- the state slice: read once, lives in registers for the whole sequence --------------
    if HAS_STATE:
        s = tl.load(state_ptr + i_n * stride_s_n + i_h * stride_s_h + state_rows,
                    mask=mask_s, other=0.0)
    else:
        s = tl.zeros([BLOCK_V, BLOCK_K], dtype=tl.float32)

    for start in range(bos, eos, CHUNK):
        rows = start + r
        m_t = rows < eos
        m_tk = m_t[:, None] & mask_k[None, :]
        m_tv = m_t[:, None] & mask_v[None, :]
        # --- this chunk's inputs (rows past the end load as zeros and contribute nothing) ----
        kc = tl.load(k_ptr + rows[:, None] * stride_k_t + i_qk * stride_k_h + offs_k[None, :],
                     mask=m_tk, other=0.0)
        qc = tl.load(q_ptr + rows[:, None] * stride_q_t + i_qk * stride_q_h + offs_k[None, :],
                     mask=m_tk, other=0.0)
        wc = tl.load(w_ptr + rows[:, None] * stride_w_t + i_h * stride_w_h + offs_k[None, :],
                     mask=m_tk, other=0.0)
        uc = tl.load(u_ptr + rows[:, None] * stride_u_t + i_h * stride_u_h + offs_v[None, :],
                     mask=m_tv, other=0.0)
        gc = tl.load(g_ptr + rows * stride_g_t + i_h, mask=m_t, other=0.0)
        # log decay over the whole chunk: G only falls, so its minimum is the last valid row's
        g_last = tl.min(gc, 0)

        # --- corrections, then outputs: both read the state as it entered the chunk ---------
        s_t = tl.trans(s)  # [BLOCK_K, BLOCK_V]
        u = uc - tl.dot(wc, s_t, input_precision=F32_DOT)
        qs = tl.dot(qc.to(tl.float32), s_t, input_precision=F32_DOT)
        # bf16 inputs are exact in tf32: exact products (widened for the CPU interpreter)
        qk = tl.dot(qc.to(tl.float32), tl.trans(kc.to(tl.float32)), input_precision="tf32")
        decay = tl.exp(tl.where(causal, gc[:, None] - gc[None, :], 0.0))
        p = tl.where(causal, qk * decay, 0.0)
        o = scale * (tl.exp(gc)[:, None] * qs + tl.dot(p, u, input_precision=F32_DOT))
        tl.store(out_ptr + rows[:, None] * stride_o_t + i_h * stride_o_h + offs_v[None, :],
                 o.to(out_ptr.dtype.element_ty), mask=m_tv)

        # --- carry the state to the end of the chunk (the sequential dependency) ------------
        u_decayed = u * tl.exp(g_last - gc)[:, None]
        s = s * tl.exp(g_last) + tl.dot(tl.trans(u_decayed), kc.to(tl.float32),
                                         input_precision=F32_DOT)

    # An empty sequence leaves zeros, as the references do (they skip it entirely).
    s = tl.where(eos > bos, s, 0.0)
    tl.store(new_state_ptr + i_n * stride_ns_n + i_h * stride_ns_h + state_rows, s, mask=mask_s)
