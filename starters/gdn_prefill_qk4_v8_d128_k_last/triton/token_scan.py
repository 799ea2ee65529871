"""Short prompts: the recurrence token by token, the decode update in a loop.

For a few dozen tokens the chunked form's fixed costs (a 64x64 triangular inverse per chunk,
three phases, grid barriers) outweigh the work: its one-launch kernel takes ~30 us even for 6
tokens. Here one program owns one (sequence, value head, block of BLOCK_V state rows), keeps
that slice of the state in fp32 registers and applies the update once per token:

    S = g S;  u = beta (v_t - S k_t);  S = S + u k_t^T;  out_t = scale S q_t

Rows of the k-last state never interact, so thin row blocks give many independent programs.
The cost is a chain of row-wise dot products (cross-lane reductions) per token. S k and S q
are both taken from the state before the update, so they run side by side, and the output
follows from them (see the loop). The time grows with the longest sequence; ``launch_config``
sends only short calls here. The next token's vectors are loaded before the current token's
update, so their latency overlaps it. All in fp32: errors stay at the bf16 output's rounding.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .chunk_prep import softplus


@triton.jit
def _token(q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, t, eos, i_qk, i_h, offs_k, offs_v,
           stride_q_t, stride_q_h, stride_k_t, stride_k_h, stride_v_t, stride_v_h,
           stride_a_t, stride_b_t):
    """Token t's q, k (fp32 [K]), its value rows (fp32 [BLOCK_V]) and raw gates.

    t is clamped into the sequence (into token 0 for an empty one; the call has >= 1 token):
    the loads issued one token ahead then stay in bounds, and past the end are never used.
    """
    t = tl.maximum(tl.minimum(t, eos - 1), 0)
    q = tl.load(q_ptr + t * stride_q_t + i_qk * stride_q_h + offs_k)
    k = tl.load(k_ptr + t * stride_k_t + i_qk * stride_k_h + offs_k)
    v = tl.load(v_ptr + t * stride_v_t + i_h * stride_v_h + offs_v)
    a = tl.load(a_ptr + t * stride_a_t + i_h)
    b = tl.load(b_ptr + t * stride_b_t + i_h)
    return (q.to(tl.float32), k.to(tl.float32), v.to(tl.float32),
            a.to(tl.float32), b.to(tl.float32))


@triton.jit
def token_scan_kernel(
    q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, a_log_ptr, dt_bias_ptr, cu_ptr, state_ptr,
    out_ptr, new_state_ptr, scale,
    stride_q_t, stride_q_h, stride_k_t, stride_k_h, stride_v_t, stride_v_h,
    stride_a_t, stride_b_t, stride_s_n, stride_s_h, stride_ns_n, stride_ns_h,
    stride_o_t, stride_o_h,
    GROUP: tl.constexpr, K: tl.constexpr, BLOCK_V: tl.constexpr, HAS_STATE: tl.constexpr,
):
    i_n = tl.program_id(0)
    i_h = tl.program_id(1)
    i_qk = i_h // GROUP
    offs_k = tl.arange(0, K)
    offs_v = tl.program_id(2) * BLOCK_V + tl.arange(0, BLOCK_V)
    rows = offs_v[:, None] * K + offs_k[None, :]  # this block of one dense [V, K] state
    if HAS_STATE:
        s = tl.load(state_ptr + i_n.to(tl.int64) * stride_s_n + i_h * stride_s_h + rows)
    else:
        s = tl.zeros([BLOCK_V, K], dtype=tl.float32)
    decay_rate = -tl.exp(tl.load(a_log_ptr + i_h).to(tl.float32))
    dt_bias = tl.load(dt_bias_ptr + i_h).to(tl.float32)
    bos = tl.load(cu_ptr + i_n)
    eos = tl.load(cu_ptr + i_n + 1)

    q, k, v, a, b = _token(q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, bos, eos, i_qk, i_h,
                           offs_k, offs_v, stride_q_t, stride_q_h, stride_k_t, stride_k_h,
                           stride_v_t, stride_v_h, stride_a_t, stride_b_t)
    for t in range(bos, eos):
        # the next token's loads first: in flight while this token's update runs
        qn, kn, vn, an, bn = _token(q_ptr, k_ptr, v_ptr, a_ptr, b_ptr, t + 1, eos, i_qk,
                                    i_h, offs_k, offs_v, stride_q_t, stride_q_h, stride_k_t,
                                    stride_k_h, stride_v_t, stride_v_h, stride_a_t, stride_b_t)
        # Both reads of the old state S at once (two independent reductions), then one update:
        # with S' = g S, S' k = g (S k) and (S' + u k^T) q = g (S q) + u (k . q).
        g = tl.exp(decay_rate * softplus(a + dt_bias))
        sk = tl.sum(s * k[None, :], axis=1)
        sq = tl.sum(s * q[None, :], axis=1)
        u = tl.sigmoid(b) * (v - g * sk)
        o = (g * sq + u * tl.sum(k * q, axis=0)) * scale
        s = s * g + u[:, None] * k[None, :]
        tl.store(out_ptr + t * stride_o_t + i_h * stride_o_h + offs_v,
                 o.to(out_ptr.dtype.element_ty))
        q, k, v, a, b = qn, kn, vn, an, bn
    # An empty sequence leaves zeros, as the references do (they skip it entirely).
    s = tl.where(eos > bos, s, 0.0)
    tl.store(new_state_ptr + i_n.to(tl.int64) * stride_ns_n + i_h * stride_ns_h + rows, s)
