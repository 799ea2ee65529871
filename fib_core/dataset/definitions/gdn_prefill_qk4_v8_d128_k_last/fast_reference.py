"""Faster references with the same arithmetic as the kit's own, for the sets never timed.

The GDN prefill reference walks the packed tokens one at a time: at 8192 tokens that is seconds
per call, and a run checks several input sets per workload. :func:`gdn_prefill_batched` does
the same per-token recurrence, with the same operations in the same order per sequence, but
steps every sequence at once: the cost follows the longest sequence instead of the total.
Sequences are sorted longest first, so the sequences still running at step t are a prefix and
each step works on a slice, not a gather.

The engine finds it through :mod:`fib_core.dataset.registry` (``fast_reference.py``, ``run``).

Example::

    from fib_core.dataset.fast_references import gdn_prefill_batched
    output, new_state = gdn_prefill_batched(q, k, v, state, A_log, a, dt_bias, b, cu, 0.0)
"""

from __future__ import annotations

import math


def gdn_prefill_batched(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    """GDN prefill (k-last state) stepping all sequences together; see the module docstring.

    Per token and v head, in fp32: S <- g S; old = k S; new = beta v + (1 - beta) old;
    S <- S - k^T old + k^T new; out = scale q S (bfloat16). Empty sequences keep a zero state.
    """
    import torch
    import torch.nn.functional as F

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

    decay = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))
    beta = torch.sigmoid(b.float())
    q_rows = q.repeat_interleave(v_heads // q_heads, dim=1)
    k_rows = k.repeat_interleave(v_heads // k.shape[1], dim=1)

    # Token of (step t, sorted sequence j); padding points at token 0 and is never read back.
    starts = torch.tensor([bounds[i] for i in order], dtype=torch.long)
    lens = torch.tensor([lengths[i] for i in order], dtype=torch.long)
    steps = torch.arange(longest, dtype=torch.long)[:, None]
    valid = steps < lens[None, :]
    tokens = torch.where(valid, starts[None, :] + steps, torch.zeros_like(steps)).to(device)
    valid = valid.to(device)

    # Per step, widened to fp32 as the loop does token by token: [steps, seqs, H, 1, K|V].
    query = q_rows[tokens].float().unsqueeze(-2)
    key = k_rows[tokens].float().unsqueeze(-2)
    value = v[tokens].float().unsqueeze(-2)
    gate = decay[tokens][..., None, None]
    bet = beta[tokens][..., None, None]
    stepped = torch.empty((longest, len(order), heads, dim_v), dtype=torch.bfloat16, device=device)

    if state is None:
        s = torch.zeros((len(order), heads, dim_k, dim_v), dtype=torch.float32, device=device)
    else:
        picked = torch.tensor(order, dtype=torch.long, device=state.device)
        s = state[picked].clone().float().transpose(-1, -2)  # [seqs, H, K, V]

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


run = gdn_prefill_batched
