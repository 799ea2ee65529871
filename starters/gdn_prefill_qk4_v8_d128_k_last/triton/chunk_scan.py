"""Stage 2 of the chunked gated delta rule: carry the state across each sequence's chunks.

With W, U~ and the in-chunk log decay G = log(gamma) from stage 1, one chunk of C tokens takes
the incoming state S0 ([V, K], k-last) to the outgoing one with two matmuls:

    U   = U~ - W S0^T                                    delta-rule corrections [C, V]
    S1  = gamma_C S0 + (U * gamma_C / gamma)^T K         state after the chunk [V, K]

This is the only sequential part of the computation, so it is kept to exactly that: per chunk
it also saves S0 (to ``h``, indexed by the chunk's flat number) and U (over U~, in place) so
that stage 3 can produce every chunk's outputs in parallel.

One program (``item``) owns one (sequence, value head, block of BLOCK_V state rows) and keeps
that slice in registers for the whole sequence: read once from ``state``, written once to
``new_state``. Rows of the k-last state never interact, so slicing V is free parallelism; it is
what keeps the GPU busy when there are few, long sequences.

Longest first (BY_LENGTH: its own launch, at most 63 sequences): programs are numbered by
``rank``, and rank r takes the r-th longest sequence (ties by position), read from
``cu_seqlens`` on the GPU. The GPU starts programs roughly in launch order, so the longest
chain starts at once instead of whenever its turn came in the batch's order. Real batches are
skewed (T=8192 in 20-57 sequences has one of 1000-2740 tokens), and their longest chain sets
this stage's time. H200, T=8192 in 20 / 32 / 57 sequences of the kit's dataset-like lengths:
119 / 133 / 100 us before, 74 / 90 / 91 us after. The one-launch kernel deals its items to
resident programs itself and keeps the batch's order: on the dataset's calls of 661-2284 tokens
longest first was up to 7% slower there, and dealt in alternating directions -6% to +4%.

Where the time goes: one walk is a chain of dependent steps, ~1.1 us a chunk (H200, T=5709 in
2 sequences: 98 us for the long one's 89 chunks), with W, K and U~ streamed in ahead of it
(Triton's pipelining, num_stages > 1: 2.4x slower without). Per chunk: the two C x K x
BLOCK_V matmuls (bf16 operands with DOT_BF16, fp32 accumulation), S0 and U out (each through
shared memory to coalesce the stores), the decays. Reading the chunk's total decay as one
value instead of reducing G over the chunk took 5-12% off (e.g. 109 -> 98 us above). Tried:
the slice held transposed ([K, V]: both matmuls become Hopper's asynchronous warpgroup ones,
fewer registers): -3% at T=8192 in 20 sequences, +6% in 32, +41% in 57, +3% at T=5709.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def sequence_of_rank(cu_ptr, num_seqs, rank, CHUNK: tl.constexpr, BLOCK_N: tl.constexpr,
                     BY_LENGTH: tl.constexpr):
    """The sequence a rank-``rank`` walk takes, with its first and end token and the flat
    number of its first chunk (the chunks of the sequences before it in the batch).

    BY_LENGTH: the rank-th longest (ties by position); otherwise the rank-th in the batch.
    Ranking compares every pair of sequences: a BLOCK_N x BLOCK_N tile in every program.
    """
    idx = tl.arange(0, BLOCK_N)
    valid = idx < num_seqs
    starts = tl.load(cu_ptr + idx, mask=valid, other=0).to(tl.int64)
    ends = tl.load(cu_ptr + idx + 1, mask=valid, other=0).to(tl.int64)
    lens = ends - starts
    if BY_LENGTH:
        # rank of sequence i: the sequences ahead of it (longer, or as long and earlier);
        # slots past num_seqs have length 0 and come after every real one, empty ones included
        ahead = (lens[None, :] > lens[:, None]) | ((lens[None, :] == lens[:, None])
                                                  & (idx[None, :] < idx[:, None]))
        i_n = tl.sum(tl.where(valid & (tl.sum(ahead.to(tl.int32), 1) == rank), idx, 0), 0)
    else:
        i_n = rank
    here = idx == i_n
    bos = tl.sum(tl.where(here, starts, 0), 0)
    eos = tl.sum(tl.where(here, ends, 0), 0)
    chunk = tl.sum(tl.where(idx < i_n, (lens + CHUNK - 1) // CHUNK, 0), 0)
    return i_n, bos, eos, chunk


@triton.jit
def chunk_scan(
    item,
    k_ptr, w_ptr, u_ptr, g_ptr, cu_ptr, state_ptr,
    h_ptr, new_state_ptr,
    num_seqs,
    stride_k_t, stride_k_h,
    stride_w_t, stride_w_h, stride_u_t, stride_u_h, stride_g_t,
    stride_h_c, stride_h_h,
    stride_s_n, stride_s_h, stride_ns_n, stride_ns_h,
    NUM_V_HEADS: tl.constexpr,
    GROUP: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_V: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNK: tl.constexpr,
    HAS_STATE: tl.constexpr,
    DOT_BF16: tl.constexpr,
    F32_DOT: tl.constexpr,
    LOAD_CACHE: tl.constexpr,
    BY_LENGTH: tl.constexpr,
):
    # --- which sequence (the rank-th longest, or rank-th), value head and state rows -------
    # items run rank slowest: all heads and row slices of the first-ranked sequence first
    blocks: tl.constexpr = (V + BLOCK_V - 1) // BLOCK_V
    rank = item // (NUM_V_HEADS * blocks)
    i_h = (item // blocks) % NUM_V_HEADS
    i_v = item % blocks
    i_qk = i_h // GROUP
    i_n, bos, eos, chunk = sequence_of_rank(cu_ptr, num_seqs, rank, CHUNK, BLOCK_N, BY_LENGTH)

    offs_k = tl.arange(0, BLOCK_K)
    offs_v = i_v * BLOCK_V + tl.arange(0, BLOCK_V)
    mask_k = offs_k < K
    mask_v = offs_v < V
    state_rows = offs_v[:, None] * K + offs_k[None, :]
    mask_s = mask_v[:, None] & mask_k[None, :]
    r = tl.arange(0, CHUNK)

    # --- the state slice: read once, lives in registers for the whole sequence --------------
    if HAS_STATE:
        s = tl.load(state_ptr + i_n.to(tl.int64) * stride_s_n + i_h * stride_s_h + state_rows,
                    mask=mask_s, other=0.0)
    else:
        s = tl.zeros([BLOCK_V, BLOCK_K], dtype=tl.float32)

    for start in range(bos, eos, CHUNK):
        rows = start + r
        m_t = rows < eos
        # --- this chunk's inputs (rows past the end load as zeros and contribute nothing) ----
        # They do not depend on the state, so with num_stages > 1 Triton issues the next
        # chunks' loads ahead (async copies into shared memory) while this one computes.
        m_tk = m_t[:, None] & mask_k[None, :]
        m_tv = m_t[:, None] & mask_v[None, :]
        u_ptrs = u_ptr + rows[:, None] * stride_u_t + i_h * stride_u_h + offs_v[None, :]
        kc = tl.load(k_ptr + rows[:, None] * stride_k_t + i_qk * stride_k_h + offs_k[None, :],
                     mask=m_tk, other=0.0)
        # W, U~ and G were written by other programs; in one fused launch LOAD_CACHE is
        # ".cg", which reads them from L2, past an L1 that could hold older lines.
        wc = tl.load(w_ptr + rows[:, None] * stride_w_t + i_h * stride_w_h + offs_k[None, :],
                     mask=m_tk, other=0.0, cache_modifier=LOAD_CACHE)
        uc = tl.load(u_ptrs, mask=m_tv, other=0.0, cache_modifier=LOAD_CACHE).to(tl.float32)
        gc = tl.load(g_ptr + rows * stride_g_t + i_h, mask=m_t, other=0.0,
                     cache_modifier=LOAD_CACHE)
        # --- save the state entering this chunk: stage 3 reads it for the outputs ----------
        tl.store(h_ptr + chunk * stride_h_c + i_h * stride_h_h + state_rows,
                 s.to(h_ptr.dtype.element_ty), mask=mask_s)
        # log decay over the whole chunk: the last valid row's G (one load, no reduction)
        g_last = tl.load(g_ptr + (tl.minimum(start + CHUNK, eos) - 1) * stride_g_t + i_h,
                         cache_modifier=LOAD_CACHE)

        # --- the corrections (kept for stage 3) and the state at the end of the chunk -------
        if DOT_BF16:  # bf16 operands, fp32 accumulation: half the tensor-core steps
            u = uc - tl.dot(wc.to(tl.bfloat16), tl.trans(s.to(tl.bfloat16)))
        else:
            u = uc - tl.dot(wc.to(tl.float32), tl.trans(s), input_precision=F32_DOT)
        tl.store(u_ptrs, u, mask=m_tv)
        u_decayed = u * tl.exp(g_last - gc)[:, None]
        if DOT_BF16:
            s = s * tl.exp(g_last) + tl.dot(tl.trans(u_decayed.to(tl.bfloat16)), kc)
        else:
            s = s * tl.exp(g_last) + tl.dot(tl.trans(u_decayed), kc.to(tl.float32),
                                             input_precision=F32_DOT)
        chunk += 1

    # An empty sequence leaves zeros, as the references do (they skip it entirely).
    s = tl.where(eos > bos, s, 0.0)
    tl.store(new_state_ptr + i_n.to(tl.int64) * stride_ns_n + i_h * stride_ns_h + state_rows, s,
             mask=mask_s)
