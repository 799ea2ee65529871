"""Reference for Gated Delta Net prefill (Qwen3-Next linear attention, packed sequences).

Sequence i is tokens cu_seqlens[i] .. cu_seqlens[i+1] of the packed q, k, v, a, b. Heads: 4 q/k
heads, 8 v heads, head size 128; v head h uses q/k head h // 2. The state is "k-last":
state[i, h] is [V, K]. Gates, in float32, for every token and v head:
    g = exp(-exp(A_log[h]) * softplus(a + dt_bias[h])),   beta = sigmoid(b)
Token by token (all 8 heads at once), with S = the sequence's state viewed as [H, K, V]:
    S <- g * S
    old = k @ S                          (what the state currently predicts for k)
    new = beta * v + (1 - beta) * old    (the blended target value)
    S <- S - k^T old + k^T new           (the delta rule)
    out[t] = scale * (q @ S)             (rounded to bfloat16 per token)
new_state[i] is S after the sequence's last token (float32, k-last). ``scale`` 0 (or None)
means 1/sqrt(128); a missing state means zeros. A sequence of length 0 is skipped, so its
new_state row stays zero (as in the contest's own reference).
This is the plain recurrence; fast kernels use a chunked form that is equal up to rounding.
"""

import math

import torch
import torch.nn.functional as F


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    _, q_heads, dim_k = q.shape
    k_heads = k.shape[1]
    v_heads, dim_v = v.shape[1], v.shape[2]
    heads = max(q_heads, v_heads)
    num_seqs = cu_seqlens.size(0) - 1
    total = q.shape[0]
    device = q.device

    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(dim_k)

    # Gates for every (token, v head): [T, 8].
    decay = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))
    beta = torch.sigmoid(b.float())

    # Every v head gets its own q/k row (still bfloat16 here; widened per token below).
    q_rows = q.repeat_interleave(v_heads // q_heads, dim=1)  # [T, 8, K]
    k_rows = k.repeat_interleave(v_heads // k_heads, dim=1)  # [T, 8, K]

    output = torch.zeros((total, heads, dim_v), dtype=torch.bfloat16, device=device)
    new_state = torch.zeros((num_seqs, heads, dim_v, dim_k), dtype=torch.float32, device=device)

    for seq in range(num_seqs):
        begin = int(cu_seqlens[seq].item())
        end = int(cu_seqlens[seq + 1].item())
        if end - begin <= 0:
            continue

        if state is None:
            s_hkv = torch.zeros((heads, dim_k, dim_v), dtype=torch.float32, device=device)
        else:
            s_hkv = state[seq].clone().float().transpose(-1, -2)  # [H, K, V]

        for tok in range(begin, end):
            query = q_rows[tok].unsqueeze(1).float()  # [H, 1, K]
            key = k_rows[tok].unsqueeze(1).float()  # [H, 1, K]
            value = v[tok].unsqueeze(1).float()  # [H, 1, V]
            g = decay[tok][:, None, None]  # [H, 1, 1]
            bt = beta[tok][:, None, None]

            s_hkv = g * s_hkv
            old = key @ s_hkv  # [H, 1, V]
            new = bt * value + (1 - bt) * old
            key_col = key.transpose(-1, -2)  # [H, K, 1]
            s_hkv = s_hkv - key_col * old + key_col * new  # rank-1 updates per head

            output[tok] = (scale * (query @ s_hkv)).squeeze(1).to(torch.bfloat16)

        new_state[seq] = s_hkv.transpose(-1, -2)  # back to [H, V, K]

    return output, new_state
