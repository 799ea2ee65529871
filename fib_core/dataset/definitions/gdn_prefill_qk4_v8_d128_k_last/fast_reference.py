"""Faster references with the same arithmetic as the kit's own, for the sets never timed.

The GDN prefill reference walks the packed tokens one at a time: at 8192 tokens that is seconds
per call, and a run checks several input sets per workload. Two faster forms of the same
per-token recurrence (same operations, same order, fp32, output rounded to bfloat16 per token):

- :func:`gdn_prefill_batched` (PyTorch, any device) steps every sequence at once: the cost
  follows the longest sequence instead of the total. Sequences are sorted longest first, so the
  sequences still running at step t are a prefix and each step works on a slice, not a gather.
  On a CPU it is bit-for-bit the loop.
- :func:`gdn_prefill_recurrent` (Triton, CUDA tensors) runs the token loop inside one kernel,
  one program per (sequence, v head, block of value columns), the state block in registers:
  milliseconds where the loop takes seconds, because the loop's cost is kernel launches, not
  arithmetic. Its sums over the key axis are ordered differently from cuBLAS's, so it agrees
  with the loop up to fp32 rounding (a GPU test compares them on every embedded workload).

``run`` takes the Triton form for CUDA tensors and the batched form otherwise. The engine finds
it through :mod:`fib_core.dataset.registry` (``fast_reference.py``, ``run``).

Example::

    from fib_core.dataset import registry

    fast = registry.get("gdn_prefill_qk4_v8_d128_k_last").module("fast_reference")
    output, new_state = fast.gdn_prefill_batched(q, k, v, state, A_log, a, dt_bias, b, cu, 0.0)
"""

from __future__ import annotations

import math


def gdn_prefill_batched(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    """GDN prefill (k-last state) stepping all sequences together; see the module docstring.

    Per token and v head, in fp32: S <- g S; old = k S; new = beta v + (1 - beta) old;
    S <- S - k^T old + k^T new; out = scale q S (bfloat16). Empty sequences keep a zero state.
    """
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    total, q_heads, dim_k = q.shape
    v_heads, dim_v = v.shape[1], v.shape[2]
    heads = max(q_heads, v_heads)
    num_seqs = cu_seqlens.size(0) - 1
    device = q.device
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(dim_k)

    output = torch.zeros((total, heads, dim_v), dtype=torch.bfloat16, device=device)
    new_state = torch.zeros((num_seqs, heads, dim_v, dim_k), dtype=torch.float32, device=device)
    bounds = cu_seqlens.tolist()
    lengths = [bounds[i + 1] - bounds[i] for i in range(num_seqs)]
    order = sorted((i for i in range(num_seqs) if lengths[i] > 0), key=lambda i: -lengths[i])
    if not order:
        return output, new_state
    longest = lengths[order[0]]

    decay, beta = _gates(A_log, a, dt_bias, b)
    q_rows = q.repeat_interleave(v_heads // q_heads, dim=1)
    k_rows = k.repeat_interleave(v_heads // k.shape[1], dim=1)

    tokens, valid = _token_grid(bounds, lengths, order, device)

    # Per step, widened to fp32 as the loop does token by token: [steps, seqs, H, 1, K|V].
    query = q_rows[tokens].float().unsqueeze(-2)
    key = k_rows[tokens].float().unsqueeze(-2)
    value = v[tokens].float().unsqueeze(-2)
    gate = decay[tokens][..., None, None]
    bet = beta[tokens][..., None, None]
    stepped = torch.empty((longest, len(order), heads, dim_v), dtype=torch.bfloat16, device=device)
    s = _starting_state(state, order, (heads, dim_k, dim_v), device)

    running = len(order)
    for t in range(longest):
        while lengths[order[running - 1]] <= t:  # finished sequences leave the prefix
            running -= 1
            new_state[order[running]] = s[running].transpose(-1, -2)
        s = s[:running]
        g = gate[t, :running]
        bt = bet[t, :running]
        kk = key[t, :running]
        s = g * s
        old = kk @ s
        new = bt * value[t, :running] + (1 - bt) * old
        key_col = kk.transpose(-1, -2)
        s = s - key_col * old + key_col * new
        stepped[t, :running] = (scale * (query[t, :running] @ s)).squeeze(-2).to(torch.bfloat16)
    for j in range(running - 1, -1, -1):
        new_state[order[j]] = s[j].transpose(-1, -2)
    output[tokens[valid]] = stepped[valid]
    return output, new_state


def _token_grid(bounds, lengths, order, device):
    """(tokens, valid) [steps, seqs]: the token of (step t, sorted sequence j), and whether
    sequence j still runs at step t (``order``: the non-empty sequences, longest first)."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    longest = lengths[order[0]]
    # Token of (step t, sorted sequence j); padding points at token 0 and is never read back.
    starts = torch.tensor([bounds[i] for i in order], dtype=torch.long)
    lens = torch.tensor([lengths[i] for i in order], dtype=torch.long)
    steps = torch.arange(longest, dtype=torch.long)[:, None]
    valid = steps < lens[None, :]
    tokens = torch.where(valid, starts[None, :] + steps, torch.zeros_like(steps)).to(device)
    return tokens, valid.to(device)


def _starting_state(state, order, sizes, device):
    """The sorted sequences' initial states as fp32 [seqs, H, K, V] (zeros without ``state``);
    ``sizes``: (heads, key size, value size)."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    heads, dim_k, dim_v = sizes
    if state is None:
        return torch.zeros((len(order), heads, dim_k, dim_v), dtype=torch.float32, device=device)
    picked = torch.tensor(order, dtype=torch.long, device=state.device)
    return state[picked].clone().float().transpose(-1, -2)  # [seqs, H, K, V]


def _gates(A_log, a, dt_bias, b):
    """(decay, beta) [T, H] in float32, the reference's own expressions."""
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch
    import torch.nn.functional as F

    decay = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))
    return decay, torch.sigmoid(b.float())


_KERNEL = None
_BLOCK_V = 32  # value columns per program: the kernel takes value sizes in whole blocks


def _recurrence_kernel():
    """The Triton kernel, compiled on first use (importing this module needs no Triton)."""
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    # Imported here: triton takes ~0.3 s to load, and importing this module does not need it.
    import triton
    import triton.language as tl

    @triton.jit
    def recurrence(q, k, v, state, decay, beta, cu, out, new_state, scale,
                   HAS_STATE: tl.constexpr, QK_HEADS: tl.constexpr, HEADS: tl.constexpr,
                   DK: tl.constexpr, DV: tl.constexpr, BV: tl.constexpr):
        seq = tl.program_id(0)
        head = tl.program_id(1)
        block = tl.program_id(2)
        begin = tl.load(cu + seq)
        end = tl.load(cu + seq + 1)
        rk = tl.arange(0, DK)
        rv = block * BV + tl.arange(0, BV)
        qk_head = head // (HEADS // QK_HEADS)
        # S[key, value] is state[seq, head, value, key] (the k-last layout) as fp32.
        offsets = ((seq.to(tl.int64) * HEADS + head) * DV + rv[None, :]) * DK + rk[:, None]
        if HAS_STATE:
            s = tl.load(state + offsets).to(tl.float32)
        else:
            s = tl.zeros((DK, BV), dtype=tl.float32)
        for tok in range(begin, end):
            row = tok.to(tl.int64)
            query = tl.load(q + (row * QK_HEADS + qk_head) * DK + rk).to(tl.float32)
            key = tl.load(k + (row * QK_HEADS + qk_head) * DK + rk).to(tl.float32)
            value = tl.load(v + (row * HEADS + head) * DV + rv).to(tl.float32)
            g = tl.load(decay + row * HEADS + head)
            bt = tl.load(beta + row * HEADS + head)
            s = g * s
            old = tl.sum(key[:, None] * s, axis=0)
            new = bt * value + (1 - bt) * old
            s = s - key[:, None] * old[None, :] + key[:, None] * new[None, :]
            o = scale * tl.sum(query[:, None] * s, axis=0)
            tl.store(out + (row * HEADS + head) * DV + rv, o.to(tl.bfloat16))
        if end > begin:  # an empty sequence's row stays zero, as in the reference
            tl.store(new_state + offsets, s)

    _KERNEL = recurrence
    return _KERNEL


def gdn_prefill_recurrent(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    """GDN prefill (k-last state) as one Triton kernel; CUDA tensors only. See the module
    docstring for how it relates to the loop.

    Example (on a GPU)::

        output, new_state = gdn_prefill_recurrent(q, k, v, state, A_log, a, dt_bias, b, cu, 0.0)
    """
    # Imported here: torch takes ~3 s to load, and importing this module does not need it.
    import torch

    if not _kernel_fits(q, k, v):
        raise ValueError(
            f"gdn_prefill_recurrent takes CUDA tensors with a power-of-two key size, value "
            f"columns in blocks of {_BLOCK_V} and equal q/k heads; got q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}, v {tuple(v.shape)} on {q.device}"
        )
    total, q_heads, dim_k = q.shape
    v_heads, dim_v = v.shape[1], v.shape[2]
    heads = max(q_heads, v_heads)
    num_seqs = cu_seqlens.size(0) - 1
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(dim_k)
    output = torch.zeros((total, heads, dim_v), dtype=torch.bfloat16, device=q.device)
    new_state = torch.zeros(
        (num_seqs, heads, dim_v, dim_k), dtype=torch.float32, device=q.device
    )
    if num_seqs <= 0 or total == 0:
        return output, new_state
    decay, beta = _gates(A_log, a, dt_bias, b)
    grid = (num_seqs, heads, dim_v // _BLOCK_V)
    _recurrence_kernel()[grid](
        q.contiguous(), k.contiguous(), v.contiguous(),
        state.contiguous() if state is not None else output,
        decay.contiguous(), beta.contiguous(), cu_seqlens.contiguous(),
        output, new_state, float(scale),
        HAS_STATE=state is not None, QK_HEADS=q_heads, HEADS=heads, DK=dim_k, DV=dim_v,
        BV=_BLOCK_V, num_warps=4,
    )
    return output, new_state


def _kernel_fits(q, k, v) -> bool:
    """Shapes the kernel is written for: CUDA tensors, a power-of-two key size, value columns
    in whole blocks of 32, as many q as k heads and v heads in whole groups of them."""
    dim_k, q_heads, v_heads = q.shape[2], q.shape[1], v.shape[1]
    return (
        q.is_cuda
        and dim_k & (dim_k - 1) == 0
        and v.shape[2] % _BLOCK_V == 0
        and k.shape[1] == q_heads
        and v_heads % q_heads == 0
    )


def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    """The fastest form for these tensors: Triton on a GPU (shapes it is written for; the
    contest's always are), batched PyTorch otherwise."""
    if _kernel_fits(q, k, v):
        return gdn_prefill_recurrent(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale)
    return gdn_prefill_batched(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale)
