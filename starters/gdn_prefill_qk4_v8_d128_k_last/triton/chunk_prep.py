"""Stage 1 of the chunked gated delta rule: everything that does not depend on the state.

Inside one chunk of C = 64 tokens (a sequence's tokens cut into consecutive 64-token pieces; the
last piece may be shorter), write gamma_t = g_1 * ... * g_t for the decay accumulated since the
chunk began and S0 for the state entering the chunk (k-last, [V, K]). Unrolling the recurrence
over the chunk gives, for the delta-rule corrections u_t (one row per token):

    u_t + beta_t sum_{s<t} (gamma_t / gamma_s) (k_t . k_s) u_s = beta_t v_t - beta_t gamma_t S0 k_t

i.e. (I + A) U = diag(beta) V - diag(beta * gamma) K S0^T with A strictly lower triangular. With
T = (I + A)^-1 this is U = U~ - W S0^T where

    W  = T diag(beta * gamma) K      [C, K]      U~ = T diag(beta) V      [C, V]

Both depend only on the chunk's own inputs, so every (chunk, head) pair is computed in parallel
here; stage 2 (chunk_scan.py) walks each sequence's chunks in order doing only the two
state-dependent matmuls, and stage 3 (chunk_output.py) the outputs. This kernel also stores
the in-chunk log decay log(gamma_t).

Where the time goes (H200, T = 8192 in 32 sequences, 1,280 programs of 4 warps): 77.6 us
for the stage (torch profiler), against 114 us for the former kernel, which built T from
16x16 blocks (40 small fp32 products, registers spilled). Per program: K K^T (64x64x128,
bf16 operands: exact products, fp32 sums), the inverse (ten 64x64x64 tf32 products in a
chain, each waiting on the one before), then W and U~ 32 columns at a time. Nsight Compute,
before the register cap: 12.5% occupancy at 177 registers (2 programs per SM), the
L1/shared-memory pipe 66% busy (each product's operands go through shared memory), 0.32
instructions issued per cycle per scheduler. The cap of 168 registers in ``LaunchConfig``
makes it 3 programs per SM (88 -> 78 us). Its memory traffic, ~76 MB at this size, would
take ~16 us at the H200's bandwidth: the stage is bound by the inverse's latency.

One program's time, read from %globaltimer inside a copy of this kernel (H200, T = 8192 in
32 sequences, 1,136 programs, 396 resident at once; medians): loads and gates 2.6 us,
K K^T and A 1.8, the inverse 8.2, W 5.9, U~ 6.1; about 25 us in all. So the two rolled loops
of W and U~ together (load a slice, one tf32 product, store: 12 us) take longer than the
inverse.

What to try next: W and U~ with bf16 operands. Splitting T diag(beta gamma) and T diag(beta)
each into a bf16 high and low part (two bf16 products per slice, ~16 bits of T against
tf32's 11) and feeding the K and V slices to the products as loaded took the stage from 77
(this kernel as it is) to 66 us here, with smaller state errors (2.5e-3 against 2.8e-3 at
this size). But it holds four 64x64 bf16 operands in registers (spills at the 168 cap), and
its results depend on Triton's pipelining depth (H200, Triton 3.6, its Triton IR looked
right): with 2 or 3 load stages they match this kernel's (state within 4.7e-3 at T=8192 in
32 sequences); with ``prep_stages=1`` (three launches) it returns wrong states without NaNs at
T=2048 in 2 (max difference 2.2), NaNs at T=8192 in 32, and an illegal address at T=1024 in
1 (run under compute-sanitizer, whose memcheck, initcheck and racecheck report nothing: the
tensor cores' asynchronous shared-memory reads are a suspect those tools do not follow, not
a finding). Not adopted until that is understood. Also: fewer
products on the inverse's chain (the first two doublings, blocks of 2 and 4, by register
shuffles instead of 64x64 products), or two chunks per program so one's products overlap
the other's waits.

Tried on this kernel: 64 or 128 columns per W/U~ step (94 and 112 us: more registers), one or
two load stages (98 and 102 us), a cap of 128 registers (spills, 88 us). Tried on earlier
64x64 forms of it (H200, same shape): 8 warps, one program per SM (2.2x slower); the
diagonal 16x16 blocks by the power series of the former kernel in tf32x3 (near fp32) and
the rest in tf32 or tf32x3 (124-171 us: three products each, more registers); those blocks by
forward substitution, one row of each block per step (152 us); and the power series in
plain tf32 (75 us, but wrong: see the comment on the inverse).
"""

from __future__ import annotations

import triton
import triton.language as tl

# Tokens per chunk: one 64-row tensor-core tile (a Hopper warp group's height). The kernels
# take it as their CHUNK parameter; the inverse's doublings (LOG2_CHUNK) follow from it.
CHUNK = 64
LOG2_CHUNK: tl.constexpr = tl.constexpr(CHUNK.bit_length() - 1)
COLS: tl.constexpr = tl.constexpr(32)  # W and U~ columns per step


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
    F32_DOT: tl.constexpr,
    NATIVE_BF16: tl.constexpr,
):
    # --- which chunk and head ------------------------------------------------------------------
    i_qk = i_h // GROUP
    seq, start, eos = locate_chunk(cu_ptr, num_seqs, pid, CHUNK, BLOCK_N)
    if seq < num_seqs:  # surplus items (the host's upper bound) do nothing
        a_log = tl.load(a_log_ptr + i_h).to(tl.float32)
        dt_bias = tl.load(dt_bias_ptr + i_h).to(tl.float32)

        # --- the chunk's keys and gates; rows past the sequence end load as zero keys, zero
        # log decay and zero beta, so they add nothing to A, W or U~ (how short chunks work)
        r = tl.arange(0, CHUNK)
        rows = start + r
        m_t = rows < eos
        offs_k = tl.arange(0, BLOCK_K)
        m_k = m_t[:, None] & (offs_k[None, :] < K)
        kc = tl.load(k_ptr + rows[:, None] * stride_k_t + i_qk * stride_k_h + offs_k[None, :],
                     mask=m_k, other=0.0)
        a = tl.load(a_ptr + rows * stride_a_t + i_h, mask=m_t, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + rows * stride_b_t + i_h, mask=m_t, other=0.0).to(tl.float32)
        beta = tl.where(m_t, tl.sigmoid(b), 0.0)
        g = tl.cumsum(tl.where(m_t, -tl.exp(a_log) * softplus(a + dt_bias), 0.0), 0)
        tl.store(g_ptr + rows * stride_g_t + i_h, g, mask=m_t)

        # --- A = strictly lower part of diag(beta) (K K^T * gamma_t / gamma_s) -----------------
        # Products of bf16 values are exact in fp32 (only the fp32 sums round), either way: bf16
        # operands on the GPU, or (Triton's CPU interpreter mis-multiplies bf16 tiles) fp32.
        if NATIVE_BF16:
            kk = tl.dot(kc, tl.trans(kc))
        else:
            kf = kc.to(tl.float32)
            kk = tl.dot(kf, tl.trans(kf), input_precision="ieee")
        lower = r[:, None] > r[None, :]
        # Mask before exp: above the diagonal the exponent is positive and could overflow.
        a_mat = tl.where(lower, beta[:, None] * kk * tl.exp(tl.where(lower, g[:, None] - g[None, :],
                                                                     0.0)), 0.0)

        # --- T = (I + A)^-1, doubling the block size: 2, 4, ..., 64 ---------------------------
        # With T_b the inverse of A's diagonal blocks of size b (block-diagonal) and M the part
        # of A inside the blocks of size 2b but outside those of size b, (T_b M)^2 = 0, so
        #     T_2b = (I + T_b M)^-1 T_b = T_b - T_b M T_b.
        # Five such steps, two 64x64 tensor-core products each: forward substitution by blocks.
        # The diagonal blocks of a triangular matrix's inverse are the inverses of its diagonal
        # blocks, so every T_b holds entries of T itself and no large terms cancel: the error
        # is about tf32's rounding times |A| |T| (~1e-4 for unit keys, in a numpy emulation).
        # (The former kernel inverted its 16x16 diagonal blocks by the power series
        # (I - A)(I + A^2)(I + A^4)(I + A^8), exact in fp32; its terms reach C(14, 7) = 3432
        # for identical keys without decay, and in tf32 that rounding swamped the result:
        # state errors of 1e9 on the GPU for a sequence of identical keys.)
        ri = r[:, None]
        ci = r[None, :]
        t = tl.where(ri == ci, 1.0, 0.0) - tl.where(ri // 2 == ci // 2, a_mat, 0.0)  # T_2
        for lvl in tl.static_range(1, LOG2_CHUNK):
            inside = (ri >> (lvl + 1) == ci >> (lvl + 1)) & (ri >> lvl != ci >> lvl)
            m = tl.where(inside, a_mat, 0.0)
            p = tl.dot(t, m, input_precision=F32_DOT)
            t = t - tl.dot(p, t, input_precision=F32_DOT)

        # --- W = T diag(beta gamma) K and U~ = T diag(beta) V, 32 columns at a time ---------------
        # (a rolled loop over narrow slices: whole 64x128 tiles with their pointers would not
        # fit in registers next to T)
        bg = beta * tl.exp(g)
        cols = tl.arange(0, COLS)
        for c0 in range(0, BLOCK_K, COLS):
            m_c = m_t[:, None] & (c0 + cols[None, :] < K)
            k_cols = k_ptr + rows[:, None] * stride_k_t + i_qk * stride_k_h + c0 + cols[None, :]
            kcs = tl.load(k_cols, mask=m_c, other=0.0)
            w = tl.dot(t, kcs.to(tl.float32) * bg[:, None], input_precision=F32_DOT)
            tl.store(w_ptr + rows[:, None] * stride_w_t + i_h * stride_w_h + c0 + cols[None, :],
                     w.to(w_ptr.dtype.element_ty), mask=m_c)
        for c0 in range(0, BLOCK_V, COLS):
            m_c = m_t[:, None] & (c0 + cols[None, :] < V)
            v_cols = v_ptr + rows[:, None] * stride_v_t + i_h * stride_v_h + c0 + cols[None, :]
            vcs = tl.load(v_cols, mask=m_c, other=0.0)
            u = tl.dot(t, vcs.to(tl.float32) * beta[:, None], input_precision=F32_DOT)
            tl.store(u_ptr + rows[:, None] * stride_u_t + i_h * stride_u_h + c0 + cols[None, :], u,
                     mask=m_c)


def prep_grid(total_tokens: int, num_seqs: int, num_v_heads: int) -> tuple[int, int]:
    """Programs for stage 1: an upper bound on the chunk count (no host sync), times heads."""
    return triton.cdiv(total_tokens, CHUNK) + num_seqs, num_v_heads

