"""Reference for Gated Delta Net decode (Qwen3-Next linear attention, one token per request).

Heads: 4 q/k heads, 8 v heads, head size 128; v head h uses q/k head h // 2. The state is
"k-last": state[b, h] is [V, K]. Gates, in float32:
    g = exp(-exp(A_log[h]) * softplus(a + dt_bias[h])),   beta = sigmoid(b)
Per request b and v head h, with S = state[b, h] viewed as [K, V]:
    S <- g * S
    old = k @ S                          (what the state currently predicts for k)
    new = beta * v + (1 - beta) * old    (the blended target value)
    S <- S - k^T old + k^T new           (the delta rule: replace old by new along k)
    out = scale * (q @ S)
``scale`` 0 (or None) means 1/sqrt(128). A missing state means zeros. The output is rounded to
bfloat16 once at the end; new_state stays float32 in the k-last layout.
"""

import math

import torch
import torch.nn.functional as F


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    batch, _, q_heads, dim_k = q.shape
    k_heads = k.shape[2]
    v_heads, dim_v = v.shape[2], v.shape[3]
    device = q.device

    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(dim_k)

    # Gates for every (request, v head): [B, 8].
    decay = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))
    decay = decay.squeeze(1)
    beta = torch.sigmoid(b.float()).squeeze(1)

    # Drop the length-1 token axis and give every v head its own q/k row.
    q_rows = q.squeeze(1).float().repeat_interleave(v_heads // q_heads, dim=1)  # [B, 8, K]
    k_rows = k.squeeze(1).float().repeat_interleave(v_heads // k_heads, dim=1)  # [B, 8, K]
    v_rows = v.squeeze(1).float()  # [B, 8, V]

    if state is None:
        start = torch.zeros((batch, v_heads, dim_v, dim_k), dtype=torch.float32, device=device)
    else:
        start = state.float()

    out = torch.zeros((batch, v_heads, dim_v), dtype=torch.float32, device=device)
    new_state = torch.zeros_like(start)

    for req in range(batch):
        for head in range(v_heads):
            key = k_rows[req, head]
            s_kv = start[req, head].clone().transpose(0, 1)  # [K, V]
            g = decay[req, head]
            bt = beta[req, head]

            s_kv = g * s_kv
            old = key @ s_kv  # [V]
            new = bt * v_rows[req, head] + (1 - bt) * old
            s_kv = s_kv - torch.outer(key, old) + torch.outer(key, new)

            out[req, head] = scale * (q_rows[req, head] @ s_kv)
            new_state[req, head] = s_kv.transpose(0, 1)  # back to [V, K]

    return out.unsqueeze(1).to(torch.bfloat16), new_state
